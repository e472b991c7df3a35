"""An inline-CUDA kernel that stores through raw symmetric-memory addresses kept as integers (the right
neighbour's buffer, from `buffer_ptrs`). Mode "freed": the addresses outlive the symmetric tensor and its
handle, which the program dropped (use after free: an illegal address on the GPU). Mode "kept": the same,
with the handle kept alive. Usage: cuda_symm_lifetime.py MODE."""
import gc
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CPP_SRC = "void fill_at(int64_t addr, int64_t n, double value);"

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void fill_at_kernel(float* dst, int n, float value) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = value;
}

void fill_at(int64_t addr, int64_t n, double value) {
    fill_at_kernel<<<1, 64, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<float*>(addr), static_cast<int>(n), static_cast<float>(value));
}
"""

_KEPT = []


def neighbour_address(rank: int, world: int, keep: bool) -> int:
    buf = symm_mem.empty(64, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    if keep:
        _KEPT.append(hdl)
    return hdl.buffer_ptrs[(rank + 1) % world]


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_test_symm_lifetime", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["fill_at"])
    addr = neighbour_address(rank, world, sys.argv[1] == "kept")
    gc.collect()
    dist.barrier()
    ext.fill_at(addr, 64, float(rank))
    torch.cuda.synchronize()
    dist.barrier()
    print("stored")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
