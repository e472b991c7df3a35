# pkb-corpus
# family: D5
# title: inline-CUDA multimem all-reduce (multimem.ld_reduce + multimem.st on multicast_ptr) with entry and exit barriers
# patterns: load_inline, symm_mem.rendezvous, multicast_ptr, multimem.ld_reduce, multimem.st, signal_pad_ptrs_dev, atom.release.sys.cas
# world_sizes: 2, 4, 8
# expect: ok
# twin: cuda_D5_multimem_no_entry_barrier_bug.py
# source: https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.cuh
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor multimem_all_reduce(int64_t multicast_ptr, int64_t buffer_ptrs, int64_t signal_pads, "
           "torch::Tensor out, int64_t rank, int64_t world);")

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

__device__ __forceinline__ uint32_t cas_release_sys(uint32_t* addr, uint32_t cmp, uint32_t val) {
    uint32_t old;
    asm volatile("atom.release.sys.global.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(old) : "l"(addr), "r"(cmp), "r"(val) : "memory");
    return old;
}

__device__ __forceinline__ uint32_t cas_acquire_sys(uint32_t* addr, uint32_t cmp, uint32_t val) {
    uint32_t old;
    asm volatile("atom.acquire.sys.global.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(old) : "l"(addr), "r"(cmp), "r"(val) : "memory");
    return old;
}

// PyTorch's signal-pad barrier: thread t signals peer t on slot channel*world+rank of the peer's pad
// (CAS 0->1, release) and consumes peer t's signal on slot channel*world+t of its own pad (CAS 1->0, acquire)
__device__ __forceinline__ void barrier_peers(uint32_t** pads, int rank, int world, int channel) {
    __syncthreads();
    if (threadIdx.x < world) {
        const int peer = threadIdx.x;
        while (cas_release_sys(pads[peer] + channel * world + rank, 0u, 1u) != 0u) {
        }
        while (cas_acquire_sys(pads[rank] + channel * world + peer, 1u, 0u) != 1u) {
        }
    }
    __syncthreads();
}
__device__ __forceinline__ float4 multimem_ld_reduce_add_v4(const float* mc) {
    float4 v;
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(mc) : "memory");
    return v;
}

__device__ __forceinline__ void multimem_st_v4(float* mc, float4 v) {
    asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1, %2, %3, %4};"
                 :: "l"(mc), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}

// rank r reduces float4s [r * per_rank, (r + 1) * per_rank) for everyone; block b of each rank takes the same
// float4s of every rank's slice, so the per-block barrier channel covers exactly what the block reads back
__global__ void multimem_all_reduce_kernel(float* mc, float** bufs, uint32_t** pads, float* out, int n, int rank, int world) {
    const int per_rank = n / 4 / world;
    barrier_peers(pads, rank, world, blockIdx.x);  // every rank's input is in place
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < per_rank; j += gridDim.x * blockDim.x) {
        float* p = mc + 4 * (rank * per_rank + j);
        multimem_st_v4(p, multimem_ld_reduce_add_v4(p));
    }
    barrier_peers(pads, rank, world, blockIdx.x);  // every rank stored its reduced slice everywhere
    const float4* mine = reinterpret_cast<const float4*>(bufs[rank]);
    float4* out4 = reinterpret_cast<float4*>(out);
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < per_rank; j += gridDim.x * blockDim.x) {
        for (int q = 0; q < world; ++q) {
            out4[q * per_rank + j] = mine[q * per_rank + j];
        }
    }
}

torch::Tensor multimem_all_reduce(int64_t multicast_ptr, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out,
                                  int64_t rank, int64_t world) {
    TORCH_CHECK(out.is_cuda(), "out must be a CUDA tensor");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    TORCH_CHECK(multicast_ptr != 0, "multicast is not supported on this system");
    TORCH_CHECK(out.numel() % (4 * world) == 0, "numel must be a multiple of 4 * world");
    multimem_all_reduce_kernel<<<2, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<float*>(multicast_ptr), reinterpret_cast<float**>(buffer_ptrs),
        reinterpret_cast<uint32_t**>(signal_pads), out.data_ptr<float>(), static_cast<int>(out.numel()),
        static_cast<int>(rank), static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_multimem_all_reduce", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["multimem_all_reduce"])
    n = 4096
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 37
    outs = []
    for it in range(2):
        buf.copy_(base * (rank + 1) + it)
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.multimem_all_reduce(hdl.multicast_ptr, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank,
                                hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = base.cpu() * (world * (world + 1) // 2) + world * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong multimem sum in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
