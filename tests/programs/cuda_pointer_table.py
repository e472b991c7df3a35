"""A kernel that reads tensors through a table of their addresses (a list of gradients, as ParallelKernelBench
problem 21's clip-grad-norm does): tensors the program made before its extension was built are live GPU
memory the kernel may read. Mode "live" sums two such tensors; mode "freed" puts the address of a tensor
the program deleted in the table, which no live allocation holds.
Usage: cuda_pointer_table.py MODE."""
import gc
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

CPP_SRC = "torch::Tensor sum_table(torch::Tensor table, torch::Tensor out);"

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void sum_table_kernel(const int64_t* table, int k, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int t = 0; t < k; ++t) acc += reinterpret_cast<const float*>(table[t])[i];
        out[i] = acc;
    }
}

torch::Tensor sum_table(torch::Tensor table, torch::Tensor out) {
    sum_table_kernel<<<1, 64, 0, at::cuda::getCurrentCUDAStream()>>>(
        table.data_ptr<int64_t>(), static_cast<int>(table.numel()), out.data_ptr<float>(), static_cast<int>(out.numel()));
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    a = torch.full((64,), 1.0, device="cuda")
    b = torch.full((64,), 2.0, device="cuda")
    gone = torch.full((1 << 18,), 3.0, device="cuda")
    out = torch.zeros(64, device="cuda")
    ext = load_inline(name="pkb_test_pointer_table", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["sum_table"])
    ptrs = [a.data_ptr(), b.data_ptr()]
    if sys.argv[1] == "freed":
        ptrs.append(gone.data_ptr())
    del gone
    gc.collect()
    ext.sum_table(torch.tensor(ptrs, dtype=torch.int64, device="cuda"), out)
    torch.cuda.synchronize()
    print("sum", float(out[0]))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
