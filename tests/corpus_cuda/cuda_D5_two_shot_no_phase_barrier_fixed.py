# pkb-corpus
# family: D5
# title: inline-CUDA two-shot all-reduce (reduce-scatter by peer reads, all-gather by peer stores) with a barrier between the all-gather and the read-out
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, peer stores, atom.release.sys.cas
# world_sizes: 2, 4
# expect: ok
# twin: cuda_D5_two_shot_no_phase_barrier_bug.py
# source: https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.cuh
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = "torch::Tensor two_shot_all_reduce(int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world);"

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
__global__ void two_shot_all_reduce_kernel(float** bufs, uint32_t** pads, float* out, int n, int rank, int world) {
    const int chunk = n / world;
    const int begin = rank * chunk;
    barrier_peers(pads, rank, world, 0);  // every rank's input is in its buffer
    for (int i = begin + threadIdx.x; i < begin + chunk; i += blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) {  // reduce-scatter: this rank reduces chunk `rank`
            acc += bufs[p][i];
        }
        for (int p = 0; p < world; ++p) {  // all-gather: push the reduced chunk into every peer's buffer
            bufs[p][i] = acc;
        }
    }
    barrier_peers(pads, rank, world, 0);  // every peer's reduced chunk has landed here
    const float* mine = bufs[rank];
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        out[i] = mine[i];
    }
}

torch::Tensor two_shot_all_reduce(int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world) {
    TORCH_CHECK(out.is_cuda(), "out must be a CUDA tensor");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    TORCH_CHECK(out.numel() % world == 0, "numel must be divisible by the world size");
    two_shot_all_reduce_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads), out.data_ptr<float>(),
        static_cast<int>(out.numel()), static_cast<int>(rank), static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_two_shot", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["two_shot_all_reduce"])
    n = 1024
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 61
    outs = []
    for it in range(2):
        buf.copy_(base + 100 * rank + it)
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.two_shot_all_reduce(hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = base.cpu() * world + 100 * (world * (world - 1) // 2) + world * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong two-shot sum in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
