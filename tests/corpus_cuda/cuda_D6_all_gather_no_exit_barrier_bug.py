# pkb-corpus
# family: D6
# title: inline-CUDA all-gather by peer stores, called in a loop without an exit barrier (a fast rank overwrites a buffer its peer still copies out)
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, peer stores, atom.release.sys.cas
# world_sizes: 2, 4
# expect: protocol
# twin: cuda_D6_all_gather_no_exit_barrier_fixed.py
# source: ROCm/aiter#4082
# bug_line: 65
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor all_gather(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, "
           "int64_t rank, int64_t world);")

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
__global__ void all_gather_kernel(const float* __restrict__ x, float** bufs, uint32_t** pads, float* out, int chunk, int rank,
                                  int world) {
    const int total = world * chunk;
    for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
        const int p = idx / chunk;
        const int i = idx % chunk;
        bufs[p][rank * chunk + i] = x[i];  // this rank's shard goes to slot `rank` of every peer's buffer
    }
    barrier_peers(pads, rank, world, 0);  // every shard has landed
    const float* mine = bufs[rank];
    for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
        out[idx] = mine[idx];
    }
    // BUG: no exit barrier: the next call pushes into peers' buffers while they may still copy this call's result
}

torch::Tensor all_gather(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank,
                         int64_t world) {
    TORCH_CHECK(x.is_cuda() && out.is_cuda(), "x and out must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && out.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(out.numel() == x.numel() * world, "out must hold world * x.numel() elements");
    all_gather_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads),
        out.data_ptr<float>(), static_cast<int>(x.numel()), static_cast<int>(rank), static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_all_gather", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["all_gather"])
    chunk = 256
    buf = symm_mem.empty(chunk * world, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    outs = []
    for it in range(3):
        x = torch.arange(chunk, dtype=torch.float32, device="cuda") + 1000 * rank + 10000 * it
        out = torch.empty(chunk * world, dtype=torch.float32, device="cuda")
        ext.all_gather(x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = torch.cat([torch.arange(chunk, dtype=torch.float32) + 1000 * r + 10000 * it for r in range(world)])
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong all-gather in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
