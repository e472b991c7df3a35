"""An inline-CUDA candidate whose kernel is a template, launched for float from the host wrapper (as LLM-written
candidates do with `k<scalar_t><<<...>>>`): the kernel copies the input, then NCCL's all-reduce sums it.
PKB_CANDIDATE_BUG=skip_last (read at call time, so one build serves both) makes the kernel leave the last
element out of the copy."""
import os

import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

CPP_SRC = "torch::Tensor copy(torch::Tensor x, int64_t skip);"

CUDA_SRC = r"""
#include <torch/extension.h>

template <typename T>
__global__ void copy_kernel(const T* x, T* out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i];
}

torch::Tensor copy(torch::Tensor x, int64_t skip) {
    auto out = torch::zeros_like(x);
    const long n = x.numel() - skip;
    copy_kernel<float><<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

_ext = load_inline(name="pkb_template_copy", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["copy"])


def solution(x):
    out = _ext.copy(x, 1 if os.environ.get("PKB_CANDIDATE_BUG") == "skip_last" else 0)
    dist.all_reduce(out)
    return out
