"""Launches the GPU refuses are refused on the simulator too (tests/programs/cuda_dynamic_shared_memory.py):
64 KiB of dynamic shared memory without cudaFuncSetAttribute(..., MaxDynamicSharedMemorySize, ...) is
"invalid argument" on sm_90 (ParallelKernelBench claude-opus-4-7 CUDA 57 passed the screen and failed so on
an H200); its twin raises the limit first and runs. The configuration rule itself is checked without a
build. Builds take minutes: the program tests are slow."""
import io
import os

import pytest
from conftest import HERE

from pkbsim.cuda.launch import refusal
from pkbsim.cuda.toolchain import unavailable
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

PROGRAM = os.path.join(HERE, "programs", "cuda_dynamic_shared_memory.py")
needs_nvcc = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


@pytest.mark.parametrize("grid,block,shmem,limit,refused", [
    ((1, 1, 1), (128, 1, 1), 65536, 49152, "invalid argument"),
    ((1, 1, 1), (128, 1, 1), 65536, 65536, None),
    ((1, 1, 1), (1025, 1, 1), 0, 49152, "invalid configuration argument"),
    ((1, 70000, 1), (32, 1, 1), 0, 49152, "invalid configuration argument"),
    ((0, 1, 1), (32, 1, 1), 0, 49152, "invalid configuration argument"),
    ((2 ** 31 - 1, 65535, 65535), (32, 32, 1), 49152, 49152, None),
])
def test_the_launch_rule(grid, block, shmem, limit, refused):
    why = refusal(grid, block, shmem, limit)
    assert (why is None) if refused is None else (refused in why), why


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("argv,ok", [([], False), (["raised"], True)])
def test_dynamic_shared_memory_beyond_48k_needs_the_attribute(argv, ok):
    out = io.StringIO()
    res = check_script(PROGRAM, argv, RunOptions(nproc=1, timeout=900, output=out))
    if ok:
        assert res.verdict == "ok" and "sum 16384.0" in out.getvalue(), [f.render() for f in res.findings]
    else:
        text = " ".join(f.render() for f in res.findings)
        assert res.verdict == "error" and "invalid argument" in text and "cudaFuncSetAttribute" in text, text


@pytest.mark.parametrize("mangled,name", [("_Z17oneshot_allreducePPfS_ii", "oneshot_allreduce"),
                                          ("_Z15attn_fwd_kernelILi64EEvPKfPfi", "attn_fwd_kernel"),
                                          ("stage_sum", "stage_sum")])
def test_messages_name_the_kernel_not_its_return_type(mangled, name):
    """A template kernel demangles with its return type first ('void attn_fwd_kernel<64>(...)')."""
    from pkbsim.cuda.launch import display_name
    assert display_name(mangled) == name


UNBOUND = '''
import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
void touch(torch::Tensor x) {{ x.add_(1); }}
"""
dist.init_process_group("nccl")
ext = load_inline("pkb_test_unbound", cpp_sources={decl!r}, cuda_sources=SRC, functions=["touch"])
ext.touch(torch.zeros(4, device="cuda"))
dist.destroy_process_group()
'''


def test_a_bound_function_needs_a_declaration_in_cpp_sources(tmp_path):
    """torch's load_inline compiles cpp_sources and the bindings of functions= in main.cpp, apart from
    cuda_sources: a function the C++ sources never declare does not build on a GPU machine ("'run' was not
    declared in this scope": two of our own test programs, on an H200), where pkb's one joined unit built it.
    The twin declares it; a quoted #include may declare it, so then nothing is claimed."""
    from pkbsim.cuda.rewrite import undeclared
    assert undeclared(["touch"], [""]) == ["touch"]
    assert undeclared(["touch"], ["void touch(torch::Tensor x);"]) == []
    assert undeclared({"touch": "doc"}, ['#include "touch.h"']) == []
    assert undeclared(None, [""]) == []
    assert undeclared("touch", ["void touch(torch::Tensor x);"]) == []          # one name, as torch takes it
    assert undeclared(["ops::touch"], ["namespace ops { void touch(torch::Tensor x); }"]) == []
    prog = tmp_path / "unbound.py"
    prog.write_text(UNBOUND.format(decl=""))
    res = check_script(str(prog), [], RunOptions(nproc=1, timeout=300, output=io.StringIO()))
    text = " ".join(f.render() for f in res.findings)
    assert "'touch' was not declared" in text and "unbound.py:11" in text, text
