# pkb-corpus
# family: W1
# title: inline-CUDA reduce-scatter by peer reads whose reduction loop starts at peer 1 (rank 0's contribution is dropped)
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, atom.release.sys.cas, wrong output
# world_sizes: 2, 4
# expect: error
# twin: cuda_W1_reduce_scatter_off_by_one_fixed.py
# source: https://docs.pytorch.org/docs/stable/symmetric_memory.html
# bug_line: 57
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = "torch::Tensor reduce_scatter(int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world);"

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
__global__ void reduce_scatter_kernel(float** bufs, uint32_t** pads, float* out, int chunk, int rank, int world) {
    barrier_peers(pads, rank, world, 0);  // every rank's input is in place
    const int begin = rank * chunk;
    for (int i = threadIdx.x; i < chunk; i += blockDim.x) {
        float acc = 0.f;
        // BUG: off by one: the loop skips peer 0, so every sum misses rank 0's chunk
        for (int p = 1; p < world; ++p) {
            acc += bufs[p][begin + i];
        }
        out[i] = acc;
    }
    barrier_peers(pads, rank, world, 0);  // the peers are done with this rank's buffer
}

torch::Tensor reduce_scatter(int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world) {
    TORCH_CHECK(out.is_cuda(), "out must be a CUDA tensor");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    reduce_scatter_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
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
    ext = load_inline(name="pkb_cuda_reduce_scatter", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["reduce_scatter"])
    chunk = 256
    buf = symm_mem.empty(chunk * world, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(chunk * world, dtype=torch.float32, device="cuda") % 53 + 1
    outs = []
    for it in range(2):
        buf.copy_(base * (rank + 1) + it)
        out = torch.empty(chunk, dtype=torch.float32, device="cuda")
        ext.reduce_scatter(hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        mine = base.cpu()[rank * chunk:(rank + 1) * chunk]
        expect = mine * (world * (world + 1) // 2) + world * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong reduce-scatter chunk in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
