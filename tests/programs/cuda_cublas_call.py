"""An inline-CUDA extension that calls cuBLAS (cublasSgemm on torch's handle). On a GPU it runs; on simulated ranks
cuBLAS is pkb's limit: with NVIDIA's cuBLAS headers (the toolkit's, or the cuda extra's wheel) it builds and
the call is "not simulated" by name, and without them it is "missing header cublas_v2.h" (benchmarks/
cuda_torch_check.sh; tests/test_cuda_wheel_headers.py). Never the program's fault.
Run: pkb check --nproc-per-node 1 tests/programs/cuda_cublas_call.py
"""
import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor mm(torch::Tensor a, torch::Tensor b);"
CU = r'''
#include <cublas_v2.h>
#include <ATen/cuda/CUDAContext.h>
torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
  auto c = torch::empty({a.size(0), b.size(1)}, a.options());
  float one = 1.f, zero = 0.f;
  cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, b.size(1), a.size(0), a.size(1), &one, b.data_ptr<float>(), b.size(1),
              a.data_ptr<float>(), a.size(1), &zero, c.data_ptr<float>(), c.size(1));
  return c;
}
'''
ext = load_inline("cublas_call", cpp_sources=CPP, cuda_sources=CU, functions=["mm"])
dist.init_process_group("nccl")
torch.cuda.set_device(dist.get_rank())
a = torch.ones(4, 4, device="cuda")
print(ext.mm(a, a).sum().item())
