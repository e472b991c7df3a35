# pkb-corpus
# family: D5
# title: inline-CUDA all-to-all by peer writes that signals each peer (st.release.sys) before writing its chunk
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, peer stores, st.release.sys, ld.acquire.sys
# world_sizes: 2, 4
# expect: protocol
# twin: cuda_D5_all_to_all_signal_first_fixed.py
# source: vllm-project/vllm#2760
# bug_line: 68
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor all_to_all(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, "
           "int64_t rank, int64_t world, int64_t seq);")

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

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* addr) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(uint32_t* addr, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(addr), "r"(v) : "memory");
}
constexpr int A2A_FLAGS = 1024;  // pad word A2A_FLAGS + src: the last call whose chunk from src has landed

__global__ void all_to_all_kernel(const float* __restrict__ x, float** bufs, uint32_t** pads, float* out, int chunk, int rank,
                                  int world, uint32_t seq) {
    const int total = world * chunk;
    // BUG: each peer is told its chunk has landed before the chunk is written
    if (threadIdx.x < world) st_release_sys(pads[threadIdx.x] + A2A_FLAGS + rank, seq);
    for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
        const int p = idx / chunk;
        const int i = idx % chunk;
        bufs[p][rank * chunk + i] = x[idx];  // segment p of x goes to slot `rank` of peer p's buffer
    }
    __syncthreads();
    if (threadIdx.x < world) {
        while (ld_acquire_sys(pads[rank] + A2A_FLAGS + threadIdx.x) < seq) {
        }
    }
    __syncthreads();
    const float* mine = bufs[rank];
    for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
        out[idx] = mine[idx];
    }
    barrier_peers(pads, rank, world, 0);  // everyone copied out before the next call writes again
}

torch::Tensor all_to_all(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank,
                         int64_t world, int64_t seq) {
    TORCH_CHECK(x.is_cuda() && out.is_cuda(), "x and out must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && out.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(x.numel() == out.numel() && x.numel() % world == 0, "x and out: same size, divisible by world");
    all_to_all_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads),
        out.data_ptr<float>(), static_cast<int>(x.numel() / world), static_cast<int>(rank), static_cast<int>(world),
        static_cast<uint32_t>(seq));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_all_to_all", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["all_to_all"])
    chunk = 128
    buf = symm_mem.empty(chunk * world, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    offs = torch.arange(chunk, dtype=torch.float32, device="cuda")
    outs = []
    for it in range(2):
        # segment p of x is meant for rank p
        x = torch.cat([offs + 1000 * rank + 100 * p + 10000 * it for p in range(world)])
        out = torch.empty(chunk * world, dtype=torch.float32, device="cuda")
        ext.all_to_all(x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size, it + 1)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = torch.cat([offs.cpu() + 1000 * src + 100 * rank + 10000 * it for src in range(world)])
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong all-to-all in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
