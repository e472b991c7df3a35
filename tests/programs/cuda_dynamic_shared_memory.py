"""A kernel launched with 64 KiB of dynamic shared memory: sm_90 refuses it ("invalid argument") unless
cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) raised the kernel's
limit first (argv[1] == "raised"). Prints the sum the kernel wrote when it ran."""
import sys

import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void stage_sum(const float* x, float* out, int n) {
  extern __shared__ float tile[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = x[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int i = 0; i < n; ++i) s += tile[i];
    *out = s;
  }
}

void run(torch::Tensor x, torch::Tensor out, bool raise_limit) {
  size_t bytes = x.numel() * sizeof(float);
  if (raise_limit) cudaFuncSetAttribute(stage_sum, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  stage_sum<<<1, 128, bytes, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(),
                                                                   (int)x.numel());
}
"""

dist.init_process_group("nccl")
ext = load_inline("pkb_test_dynamic_smem", cpp_sources="void run(torch::Tensor x, torch::Tensor out, bool raise_limit);",
                  cuda_sources=SRC, functions=["run"])
x = torch.ones(16384, device="cuda")  # 64 KiB
out = torch.zeros(1, device="cuda")
ext.run(x, out, len(sys.argv) > 1 and sys.argv[1] == "raised")
torch.cuda.synchronize()
print("sum", out.item())
dist.destroy_process_group()
