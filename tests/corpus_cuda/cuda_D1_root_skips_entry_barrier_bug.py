# pkb-corpus
# family: D1
# title: inline-CUDA reduce-to-root by peer stores whose root skips the entry barrier (rank-dependent branch): the other ranks wait for its signal forever
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, peer stores, atom.release.sys.cas, atom.acquire.sys.cas
# world_sizes: 2, 4
# expect: protocol
# twin: cuda_D1_root_skips_entry_barrier_fixed.py
# source: pytorch/pytorch#138322
# bug_line: 58
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor reduce_to_root(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, "
           "int64_t root, int64_t rank, int64_t world);")

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

// reduce to the root by peer stores: rank p writes its input into slot p of the root's symmetric buffer
// (world slots of n floats), then the root sums the slots. Channel 0: the root has summed the previous call's
// slots (they may be overwritten); channel 1: every slot holds this call's input
__global__ void reduce_to_root_kernel(const float* x, float** bufs, uint32_t** pads, float* out, int n, int root,
                                      int rank, int world) {
    if (rank != root) barrier_peers(pads, rank, world, 0);  // BUG: the root sends nothing, so it skips the entry barrier
    float* slot = bufs[root] + rank * n;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        slot[i] = x[i];
    }
    barrier_peers(pads, rank, world, 1);
    if (rank == root) {
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
            float acc = 0.f;
            for (int p = 0; p < world; ++p) {
                acc += bufs[root][p * n + i];
            }
            out[i] = acc;
        }
    }
}

torch::Tensor reduce_to_root(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out,
                             int64_t root, int64_t rank, int64_t world) {
    TORCH_CHECK(x.is_cuda() && out.is_cuda(), "x and out must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x must be contiguous float32");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    TORCH_CHECK(x.numel() == out.numel(), "x and out must have the same size");
    TORCH_CHECK(world <= 256 && root >= 0 && root < world, "bad root or world size");
    reduce_to_root_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads),
        out.data_ptr<float>(), static_cast<int>(x.numel()), static_cast<int>(root), static_cast<int>(rank),
        static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_reduce_to_root", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["reduce_to_root"])
    n, root = 512, 0
    buf = symm_mem.empty(world * n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 113
    outs = []
    for it in range(2):
        x = base * (rank + 1) + it
        out = torch.zeros(n, dtype=torch.float32, device="cuda")
        ext.reduce_to_root(x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, root, hdl.rank, hdl.world_size)
        outs.append(out)
    dist.barrier()
    if rank == root:
        for it, out in enumerate(outs):
            expect = base.cpu() * (world * (world + 1) // 2) + world * it
            assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong reduction in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
