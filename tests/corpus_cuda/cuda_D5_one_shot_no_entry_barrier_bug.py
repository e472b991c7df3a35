# pkb-corpus
# family: D5
# title: inline-CUDA one-shot all-reduce over peer pointers that reads the peers' buffers without an entry barrier
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, atom.release.sys.cas, atom.acquire.sys.cas
# world_sizes: 2, 4, 8
# expect: protocol
# twin: cuda_D5_one_shot_no_entry_barrier_fixed.py
# source: https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.cuh
# bug_line: 55
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = "torch::Tensor one_shot_all_reduce(int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world);"

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
__global__ void one_shot_all_reduce_kernel(float** bufs, uint32_t** pads, float* out, int n, int rank, int world) {
    const int per_block = (n + gridDim.x - 1) / gridDim.x;
    const int begin = blockIdx.x * per_block;
    const int end = min(n, begin + per_block);
    // BUG: no entry barrier: a peer's buffer is read before that peer has copied its input into it
    for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) {
            acc += bufs[p][i];
        }
        out[i] = acc;
    }
    barrier_peers(pads, rank, world, blockIdx.x);  // nobody reads this rank's buffer any more
}

torch::Tensor one_shot_all_reduce(int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world) {
    TORCH_CHECK(out.is_cuda(), "out must be a CUDA tensor");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    const int n = static_cast<int>(out.numel());
    one_shot_all_reduce_kernel<<<2, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads), out.data_ptr<float>(), n,
        static_cast<int>(rank), static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_one_shot", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["one_shot_all_reduce"])
    n = 2048
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 251
    outs = []
    for it in range(2):
        buf.copy_(base * (rank + 1) + it)
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.one_shot_all_reduce(hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = base.cpu() * (world * (world + 1) // 2) + world * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong one-shot sum in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
