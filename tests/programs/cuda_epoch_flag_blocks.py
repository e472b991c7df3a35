"""An inline-CUDA all-reduce whose every block waits for the same per-call flags: block 0 of each rank
publishes an epoch (the call number) to every peer with a release store, then all blocks wait with
acquire loads until each peer's epoch arrived and sum their share of the peers' buffers. One set of a
flag satisfies one wait of every block: correct (a block never reuses a set). Mode `reused` sets the flag
in the first call only and waits for "not zero", so the second call passes on the first call's flag: the
slot is reused without a reset (D2), and a block can read a peer's buffer before the peer wrote this
call's data.
Usage: cuda_epoch_flag_blocks.py [ok|reused]."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CPP_SRC = "torch::Tensor all_reduce(int64_t bufs, int64_t pads, torch::Tensor out, int64_t rank, int64_t world, int64_t epoch, bool reused);"

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* addr) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(uint32_t* addr, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(addr), "r"(v) : "memory");
}

__global__ void all_reduce_kernel(float** bufs, uint32_t** pads, float* out, int n, int rank, int world,
                                  uint32_t epoch, bool reused) {
    if (blockIdx.x == 0 && threadIdx.x < world && !(reused && epoch > 1)) {
        st_release_sys(pads[threadIdx.x] + rank, epoch);
    }
    if (threadIdx.x < world) {
        const uint32_t* flag = pads[rank] + threadIdx.x;
        while (reused ? ld_acquire_sys(flag) == 0u : ld_acquire_sys(flag) < epoch) {
        }
    }
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) {
            acc += bufs[p][i];
        }
        out[i] = acc;
    }
}

torch::Tensor all_reduce(int64_t bufs, int64_t pads, torch::Tensor out, int64_t rank, int64_t world, int64_t epoch,
                         bool reused) {
    all_reduce_kernel<<<4, 64, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<float**>(bufs), reinterpret_cast<uint32_t**>(pads), out.data_ptr<float>(),
        static_cast<int>(out.numel()), static_cast<int>(rank), static_cast<int>(world), static_cast<uint32_t>(epoch),
        reused);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    reused = sys.argv[1:] == ["reused"]
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_epoch_flag_blocks", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["all_reduce"])
    n = 512
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    for it in range(2):
        buf.copy_(torch.arange(n, dtype=torch.float32, device="cuda") + rank + 100 * it)
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.all_reduce(hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size, it + 1, reused)
        dist.barrier()   # no rank overwrites its buffer while a peer still reads it
        expect = torch.arange(n, dtype=torch.float32) * world + world * (world - 1) // 2 + 100 * world * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong sum in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
