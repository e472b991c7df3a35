"""One thread waits for eight flags in turn (`for p: while (flag[p] < 1);`), set by the host before the
launch. Mode `set`: every flag is set, each wait passes on its first read: correct (pkb reported a deadlock:
the outer loop's backward branches counted as spin rounds). Mode `missing`: flag 6 is never set: a real
deadlock. Usage: cuda_sequential_flag_waits.py [set|missing]."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CPP_SRC = "void wait_all(int64_t flags, int64_t n);"
CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cstdint>

__global__ void wait_all_kernel(const uint32_t* flags, int n) {
    if (threadIdx.x == 0) {
        for (int p = 0; p < n; ++p) {
            uint32_t v;
            do {
                asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flags + p) : "memory");
            } while (v < 1u);
        }
    }
    __syncthreads();
}

void wait_all(int64_t flags, int64_t n) {
    wait_all_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(reinterpret_cast<const uint32_t*>(flags), (int)n);
}
"""


def main():
    missing = sys.argv[1:] == ["missing"]
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    ext = load_inline(name="pkb_cuda_sequential_flag_waits", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["wait_all"])
    flags = symm_mem.empty(8, dtype=torch.int32, device="cuda")
    hdl = symm_mem.rendezvous(flags, dist.group.WORLD)
    flags.fill_(1)
    if missing:
        flags[6] = 0
    hdl.barrier(channel=0)
    ext.wait_all(flags.data_ptr(), 8)
    hdl.barrier(channel=0)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
