# pkb-corpus
# family: D1
# title: inline-CUDA ring all-reduce (reduce-scatter + all-gather steps through staging slots, st.release.sys / ld.acquire.sys step flags) waiting on its own step flag
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, peer stores, st.release.sys, ld.acquire.sys, atom.release.sys.cas, ring
# world_sizes: 2, 4
# expect: ok
# twin: cuda_D1_ring_wait_wrong_neighbour_bug.py
# source: pytorch/pytorch#163194
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor ring_all_reduce(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, int64_t rank, "
           "int64_t world, int64_t seq);")

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
constexpr int STEP_FLAGS = 64;  // pad words 64 + s: the call number whose step-s chunk the previous rank has stored

// ring all-reduce in place on x (world chunks of `chunk` floats): world-1 reduce-scatter steps then world-1
// all-gather steps; at step s a rank stores one chunk into staging slot s of the next rank's symmetric buffer
// (2*(world-1) slots), publishes the call number on the next rank's step-s flag, waits for its own step-s flag
// (set by the previous rank) and adds (reduce-scatter) or copies (all-gather) the chunk it received
__global__ void ring_all_reduce_kernel(float* x, float** bufs, uint32_t** pads, int chunk, int rank, int world,
                                       uint32_t seq) {
    barrier_peers(pads, rank, world, 0);  // every rank has consumed its staging slots of the previous call
    const int next = (rank + 1) % world;
    const int steps = 2 * (world - 1);
    for (int s = 0; s < steps; ++s) {
        const bool gather = s >= world - 1;
        const int k = gather ? s - (world - 1) : s;
        const int send_chunk = ((gather ? rank + 1 : rank) - k + 2 * world) % world;
        const int recv_chunk = (send_chunk - 1 + world) % world;
        for (int i = threadIdx.x; i < chunk; i += blockDim.x) {
            bufs[next][s * chunk + i] = x[send_chunk * chunk + i];
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            st_release_sys(pads[next] + STEP_FLAGS + s, seq);
            while (ld_acquire_sys(pads[rank] + STEP_FLAGS + s) < seq) {
            }
        }
        __syncthreads();
        for (int i = threadIdx.x; i < chunk; i += blockDim.x) {
            const float v = bufs[rank][s * chunk + i];
            x[recv_chunk * chunk + i] = gather ? v : x[recv_chunk * chunk + i] + v;
        }
        __syncthreads();
    }
}

torch::Tensor ring_all_reduce(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, int64_t rank, int64_t world,
                              int64_t seq) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x must be contiguous float32");
    TORCH_CHECK(x.numel() % world == 0, "x holds one chunk per rank");
    TORCH_CHECK(world >= 2 && world <= 32, "2 to 32 ranks");
    ring_all_reduce_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads),
        static_cast<int>(x.numel() / world), static_cast<int>(rank), static_cast<int>(world),
        static_cast<uint32_t>(seq));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return x;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_ring_all_reduce", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["ring_all_reduce"])
    chunk = 128
    staging = symm_mem.empty(2 * (world - 1) * chunk, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(staging, dist.group.WORLD)
    base = torch.arange(world * chunk, dtype=torch.float32, device="cuda") % 89
    outs = []
    for it in range(2):
        x = base * (rank + 1) + it
        ext.ring_all_reduce(x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, hdl.rank, hdl.world_size, it + 1)
        outs.append(x)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = base.cpu() * (world * (world + 1) // 2) + world * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong ring all-reduce in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
