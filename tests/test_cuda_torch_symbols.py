"""A symbol torch's CPU-side code does not export is the candidate's error, as on a GPU: torch's CPU
libraries are the same code in either build, so an instantiation torch never made
(`at::TensorBase::data_ptr<long long>`: torch instantiates `long`, which int64_t is on x86-64 Linux) is an
undefined symbol when the extension loads on a GPU machine (a compile error there), where pkb had stubbed it
and called the failure its own limit. CUDA-side names (libtorch_cuda, libc10_cuda, NVIDIA's libraries) stay
stand-ins' business."""
import io

import pytest

from pkbsim.cuda.build import absent_from_torch
from pkbsim.cuda.toolchain import unavailable
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

needs_nvcc = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


def test_only_torch_s_own_cpu_side_names_are_the_candidate_s():
    assert absent_from_torch(["_ZNK2at10TensorBase8data_ptrIxEEPT_v"]) == [
        ("_ZNK2at10TensorBase8data_ptrIxEEPT_v", "long long* at::TensorBase::data_ptr<long long>() const")]
    assert [m for m, _ in absent_from_torch(["_ZN5torch3jit4fakeEv"])] == ["_ZN5torch3jit4fakeEv"]
    # the twins: a CUDA-side name of torch, a c10d name (partly CUDA-side), a name outside torch
    assert absent_from_torch(["_ZN3c104cuda20getCurrentCUDAStreamEa"]) == []
    assert absent_from_torch(["_ZN4c10d15symmetric_memory4rendEv"]) == []
    assert absent_from_torch(["cuLaunchKernel", "foo_bar", "_ZN7mylib3runEv"]) == []


PROGRAM = '''
import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
__global__ void fill({ctype}* p) {{ p[threadIdx.x] = threadIdx.x; }}
void run(torch::Tensor x) {{ fill<<<1, 4>>>(({ctype}*)x.data_ptr<{ctype}>()); }}
"""
dist.init_process_group("nccl")
ext = load_inline("pkb_test_{name}", cpp_sources="void run(torch::Tensor x);", cuda_sources=SRC, functions=["run"])
x = torch.zeros(4, dtype=torch.int64, device="cuda")
ext.run(x)
assert x.tolist() == [0, 1, 2, 3], x
dist.destroy_process_group()
'''


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("ctype,undefined", [("long long", True), ("int64_t", False)])
def test_data_ptr_of_long_long_does_not_load_and_its_int64_t_twin_runs(tmp_path, ctype, undefined):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM.format(ctype=ctype, name=ctype.replace(" ", "_")))
    res = check_script(str(prog), [], RunOptions(nproc=1, timeout=600, output=io.StringIO()))
    text = " ".join(f.render() for f in res.findings)
    if undefined:
        assert "undefined symbol: long long* at::TensorBase::data_ptr<long long>() const" in text, text
        assert "not simulated" not in text and "unsupported CUDA/torch symbol" not in text, text
    else:
        assert res.findings == [], text
