"""A candidate that builds its CUDA extension through a helper module of its own (as every ParallelKernelBench
CUDA solution does, through `utils.cuda_helpers.compile_cuda_extension`) never names load_inline itself. The
screen must still see that it builds, so that pkb's runtime is made on the trusted side before the candidate's
process starts: otherwise that process finds the runtime's folder read-only and every such candidate is
inconclusive (all of ParallelKernelBench's CUDA trees were, for a day). Twin: a file that imports only
installed packages, or a local module that builds nothing, does not build."""
import json
import os
import subprocess
import textwrap

import pytest
from hostile import BOUND_S, PKB

from pkbsim.ptx.compile import find_nvcc
from pkbsim.screen.prebuild import builds_extensions

HELPER = textwrap.dedent('''
    from torch.utils.cpp_extension import load_inline


    def compile_ext(name, cpp_src, cuda_src, functions):
        return load_inline(name, cpp_sources=cpp_src, cuda_sources=cuda_src, functions=functions)
''')
CANDIDATE = textwrap.dedent('''
    import torch
    import torch.distributed as dist
    from helpers.build import compile_ext

    CUDA = r"""
    #include <torch/extension.h>
    __global__ void copy_kernel(const float* x, float* out, long n) {
        long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
        if (i < n) out[i] = x[i];
    }
    torch::Tensor copy(torch::Tensor x) {
        auto out = torch::empty_like(x);
        copy_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
        return out;
    }
    """
    _ext = None


    def solution(x):
        global _ext
        _ext = _ext or compile_ext("pkb_helper_copy", "torch::Tensor copy(torch::Tensor x);", CUDA, ["copy"])
        out = _ext.copy(x)
        dist.all_reduce(out)
        return out
''')


def _tree(root, helper: str = HELPER):
    (root / "helpers").mkdir()
    (root / "helpers" / "__init__.py").write_text("")
    (root / "helpers" / "build.py").write_text(helper)
    (root / "cand.py").write_text(CANDIDATE)
    return str(root / "cand.py")


def test_a_build_through_a_helper_module_beside_the_candidate_is_seen(tmp_path):
    assert builds_extensions(_tree(tmp_path))


def test_a_helper_that_builds_nothing_and_installed_packages_are_not_builds(tmp_path):
    assert not builds_extensions(_tree(tmp_path, helper="def compile_ext(*a):\n    return None\n"))
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nimport torch.distributed as dist\n")   # torch names cpp_extension itself
    assert not builds_extensions(str(plain))


def test_a_helper_found_under_a_given_root_is_seen(tmp_path):
    root, elsewhere = tmp_path / "checkout", tmp_path / "solutions"
    root.mkdir()
    elsewhere.mkdir()
    cand = _tree(root)
    moved = elsewhere / "cand.py"
    os.rename(cand, moved)
    assert not builds_extensions(str(moved))
    assert builds_extensions(str(moved), (str(root),))


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed: the extension cannot be built")
def test_the_sandboxed_screen_simulates_a_candidate_that_builds_through_a_helper(tmp_path):
    cand = _tree(tmp_path)
    cache = tmp_path / "cache"   # empty: pkb's runtime is not there yet, so the screen must build it first
    proc = subprocess.run([*PKB, "screen", cand, "--task", "all_reduce", "--world-size", "2", "--no-cost", "--json"],
                          capture_output=True, text=True, timeout=BOUND_S, cwd=str(tmp_path),
                          env=dict(os.environ, PKB_CACHE_DIR=str(cache)))
    res = json.loads(proc.stdout)
    assert res["verdict"] == "pass", (res.get("reasons"), proc.stderr[-2000:])
