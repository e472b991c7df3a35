# pkb-corpus
# family: W2
# title: inline-CUDA reduce-scatter by peer stores whose slot offset uses the owner's index: all ranks write the same slot of the owner's buffer (write-write race)
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, peer stores, atom.release.sys.cas, atom.acquire.sys.cas
# world_sizes: 2, 4
# expect: protocol
# twin: cuda_W2_reduce_scatter_push_same_slot_fixed.py
# source: https://github.com/RWTH-HPC/RMARaceBench
# bug_line: 61
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor reduce_scatter(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, "
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

// reduce-scatter by peer stores: rank r owns chunk r of the result; every rank writes its partial chunk o into
// slot <its rank> of owner o's symmetric buffer (world slots of `chunk` floats), then each owner sums its slots.
// Channel 0: every owner has summed the previous call's slots; channel 1: every slot holds this call's partials
__global__ void reduce_scatter_kernel(const float* x, float** bufs, uint32_t** pads, float* out, int chunk, int rank,
                                      int world) {
    barrier_peers(pads, rank, world, 0);
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < world * chunk; idx += gridDim.x * blockDim.x) {
        const int owner = idx / chunk, i = idx % chunk;
        float* slot = bufs[owner] + owner * chunk;  // BUG: slot of the owner, not of the writer: every rank writes the same slot
        slot[i] = x[owner * chunk + i];
    }
    barrier_peers(pads, rank, world, 1);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < chunk; i += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) {
            acc += bufs[rank][p * chunk + i];
        }
        out[i] = acc;
    }
}

torch::Tensor reduce_scatter(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out,
                             int64_t rank, int64_t world) {
    TORCH_CHECK(x.is_cuda() && out.is_cuda(), "x and out must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x must be contiguous float32");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    TORCH_CHECK(x.numel() == world * out.numel(), "x holds one chunk per rank");
    TORCH_CHECK(world <= 256, "one thread per peer in the barrier");
    reduce_scatter_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads),
        out.data_ptr<float>(), static_cast<int>(out.numel()), static_cast<int>(rank), static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_reduce_scatter_push", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["reduce_scatter"])
    chunk = 256
    buf = symm_mem.empty(world * chunk, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(world * chunk, dtype=torch.float32, device="cuda") % 101
    outs = []
    for it in range(2):
        x = base * (rank + 1) + it
        out = torch.empty(chunk, dtype=torch.float32, device="cuda")
        ext.reduce_scatter(x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        full = base.cpu() * (world * (world + 1) // 2) + world * it
        assert torch.equal(out.cpu(), full[rank * chunk:(rank + 1) * chunk]), f"rank {rank}: wrong chunk in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
