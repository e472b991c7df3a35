"""Broken: inline CUDA with a syntax error in the kernel. Must be "compile_error" naming nvcc's first error."""
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x
  if (i < n) x[i] *= 2.0f;
}
torch::Tensor run(torch::Tensor x) {
  scale<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), x.numel());
  return x;
}
"""
ext = load_inline("pkb_bad_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=CUDA,
                  functions=["run"], verbose=False)


def solution(x):
    return ext.run(x.clone())
