"""expect: pass - correct inline CUDA (a copy kernel before NCCL's all-reduce); its kernel runs on the PTX
interpreter (without nvcc the screen passes it to hardware as "not simulated" after the compile check)."""
import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

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
ext = load_inline("pkb_copy", cpp_sources="torch::Tensor copy(torch::Tensor x);", cuda_sources=CUDA,
                  functions=["copy"])


def solution(x):
    out = ext.copy(x)
    dist.all_reduce(out)
    return out
