# pkb-corpus
# family: D1
# title: inline-CUDA signal-pad barrier kernel that stores a constant 1 while the waiters expect the epoch number (the second barrier never opens)
# patterns: load_inline, symm_mem.rendezvous, signal_pad_ptrs_dev, buffer_ptrs_dev, st.release.sys, ld.acquire.sys, spin loop
# world_sizes: 2, 4
# expect: protocol
# twin: cuda_D1_barrier_constant_flag_fixed.py
# source: pytorch/pytorch#163194
# bug_line: 41
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = """
void barrier(int64_t signal_pads, int64_t rank, int64_t world, int64_t epoch);
torch::Tensor ring_read(int64_t buffer_ptrs, torch::Tensor out, int64_t rank, int64_t world);
"""

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
// word src of each rank's signal pad holds the last epoch that rank src reached
__global__ void barrier_kernel(uint32_t** pads, int rank, int world, uint32_t epoch) {
    const int peer = threadIdx.x;
    if (peer < world) {
        // BUG: stores 1 instead of the epoch: from the second barrier on the waiters spin forever
        st_release_sys(pads[peer] + rank, 1u);
        while (ld_acquire_sys(pads[rank] + peer) < epoch) {
        }
    }
}

__global__ void ring_read_kernel(float** bufs, float* out, int n, int rank, int world) {
    const float* src = bufs[(rank + 1) % world];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = src[i];
    }
}

void barrier(int64_t signal_pads, int64_t rank, int64_t world, int64_t epoch) {
    TORCH_CHECK(world <= 32, "one warp signals all peers");
    barrier_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<uint32_t**>(signal_pads), static_cast<int>(rank), static_cast<int>(world),
        static_cast<uint32_t>(epoch));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor ring_read(int64_t buffer_ptrs, torch::Tensor out, int64_t rank, int64_t world) {
    TORCH_CHECK(out.is_cuda(), "out must be a CUDA tensor");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    ring_read_kernel<<<2, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<float**>(buffer_ptrs), out.data_ptr<float>(), static_cast<int>(out.numel()),
        static_cast<int>(rank), static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_epoch_barrier", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["barrier", "ring_read"])
    n = 512
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    epoch = 0
    outs = []
    for it in range(2):
        buf.copy_(torch.arange(n, dtype=torch.float32, device="cuda") + 1000 * rank + 10000 * it)
        epoch += 1
        ext.barrier(hdl.signal_pad_ptrs_dev, hdl.rank, hdl.world_size, epoch)  # every rank wrote its buffer
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.ring_read(hdl.buffer_ptrs_dev, out, hdl.rank, hdl.world_size)
        outs.append(out)
        epoch += 1
        ext.barrier(hdl.signal_pad_ptrs_dev, hdl.rank, hdl.world_size, epoch)  # the neighbour finished reading
    dist.barrier()
    for it, out in enumerate(outs):
        expect = torch.arange(n, dtype=torch.float32) + 1000 * ((rank + 1) % world) + 10000 * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong ring read in round {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
