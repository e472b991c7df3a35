"""expect: static compile_error - an inline CUDA kernel with a missing semicolon."""
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>

__global__ void scale_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i]
}

torch::Tensor scale(torch::Tensor x) {
    auto out = torch::empty_like(x);
    scale_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}
"""
ext = load_inline("broken_scale", cpp_sources="torch::Tensor scale(torch::Tensor x);", cuda_sources=CUDA,
                  functions=["scale"])


def solution(x):
    return ext.scale(x)
