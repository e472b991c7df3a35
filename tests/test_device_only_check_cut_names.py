"""The device-only compile check (the screen's static stage) blanks the host code, torch's headers too: a
device function typed with `uint32_t`, which only <cstdint> (through torch/extension.h) declares, fails
there with nvcc's first error "An inline __device__ ... variable must have internal linkage" and only then
'identifier "uint32_t" is undefined'. The first error was taken as the candidate's (a ParallelKernelBench
gemini-cuda grad-accumulation candidate that compiles with its headers was rejected): a name the cut may
have removed makes the check inconclusive, whichever error nvcc names first. A real device error is still
the candidate's."""
import pytest

from pkbsim.ptx.compile import find_nvcc
from pkbsim.screen import cuda_check

pytestmark = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")

SOURCE = """\
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ void set_flag(uint32_t* addr) {
    *addr = 1u;
}

__global__ void flag_kernel(uint32_t* flags, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) set_flag(flags + i);
}

void launch(torch::Tensor flags) {
    flag_kernel<<<1, 32>>>(reinterpret_cast<uint32_t*>(flags.data_ptr<int>()), flags.numel());
}
"""


def test_a_type_from_a_blanked_header_is_inconclusive_not_an_error():
    report = cuda_check._run_nvcc(find_nvcc(), SOURCE)
    assert report.status == "inconclusive", report
    assert "uint32_t" in report.message


def test_a_real_device_error_is_still_the_candidates():
    broken = SOURCE.replace("#include <cuda_runtime.h>", "#include <cuda_runtime.h>\n#include <cstdint>")
    broken = broken.replace("*addr = 1u;", "*addr = 1u")
    report = cuda_check._run_nvcc(find_nvcc(), broken)
    assert report.status == "error" and report.line == 7, report  # nvcc names the line after the statement


# a namespace alias of pybind11 outside any host block: the cut removed pybind11's headers, not the candidate
ALIAS = """\
#include <torch/extension.h>
#include <cstdint>
namespace py = pybind11;
using namespace torch;

__global__ void scale(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}

void launch(torch::Tensor x) { scale<<<1, 32>>>(x.data_ptr<float>(), x.numel()); }
"""


def test_a_namespace_the_cut_removed_is_not_the_candidates_error():
    assert cuda_check._run_nvcc(find_nvcc(), ALIAS).status == "ok"


def test_a_real_error_after_the_alias_keeps_its_line():
    broken = ALIAS.replace("x[i] *= 2.0f;", "x[i] *= 2.0f")
    report = cuda_check._run_nvcc(find_nvcc(), broken)
    assert report.status == "error" and report.line == 9, report  # nvcc names the line after the statement
