# pkb-corpus
# family: D7
# title: inline-CUDA global sum of squares whose 4 blocks spin on a shared arrival counter until every block of the launch has arrived (needs co-residency)
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, atomicAdd, grid barrier, shared-memory reduction
# world_sizes: 2, 4
# expect: protocol
# twin: cuda_D7_grid_barrier_co_residency_fixed.py
# source: pytorch/pytorch#159215
# bug_line: 103
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor global_sumsq(torch::Tensor x, torch::Tensor partials, torch::Tensor arrived, int64_t epoch, "
           "int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world);")

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
__global__ void global_sumsq_kernel(const float* __restrict__ x, int n, float* partials, unsigned int* arrived,
                                    unsigned int epoch, float** bufs, uint32_t** pads, float* out, int rank, int world) {
    __shared__ float red[256];
    float s = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        s += x[i] * x[i];
    }
    red[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            red[threadIdx.x] += red[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = red[0];
        __threadfence();
        atomicAdd(arrived, 1u);
        while (atomicAdd(arrived, 0u) < gridDim.x * epoch) {  // grid barrier: every block of this launch
        }
        __threadfence();
    }
    __syncthreads();
    if (blockIdx.x != 0) {
        return;
    }
    if (threadIdx.x == 0) {  // block 0 publishes this rank's total ...
        float total = 0.f;
        for (int b = 0; b < gridDim.x; ++b) {
            total += partials[b];
        }
        bufs[rank][0] = total;
    }
    barrier_peers(pads, rank, world, 0);
    if (threadIdx.x == 0) {  // ... and adds up the totals of all ranks
        float acc = 0.f;
        for (int p = 0; p < world; ++p) {
            acc += bufs[p][0];
        }
        out[0] = acc;
    }
    barrier_peers(pads, rank, world, 0);
}

torch::Tensor global_sumsq(torch::Tensor x, torch::Tensor partials, torch::Tensor arrived, int64_t epoch,
                           int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world) {
    TORCH_CHECK(x.is_cuda() && partials.is_cuda() && arrived.is_cuda() && out.is_cuda(), "CUDA tensors only");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && out.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(arrived.scalar_type() == torch::kInt32 && partials.numel() >= 4, "int32 counter, 4 partials");
    // BUG: 4 blocks that wait for each other in the grid barrier: only correct if all are co-resident
    const int blocks = 4;
    global_sumsq_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), static_cast<int>(x.numel()), partials.data_ptr<float>(),
        reinterpret_cast<unsigned int*>(arrived.data_ptr<int>()), static_cast<unsigned int>(epoch),
        reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads), out.data_ptr<float>(),
        static_cast<int>(rank), static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_global_sumsq", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["global_sumsq"])
    n = 2048
    buf = symm_mem.empty(1, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    partials = torch.zeros(4, dtype=torch.float32, device="cuda")
    arrived = torch.zeros(1, dtype=torch.int32, device="cuda")
    outs = []
    for it in range(2):
        x = (torch.arange(n, device="cuda") % 7 - 3 + rank + it).to(torch.float32)
        out = torch.empty(1, dtype=torch.float32, device="cuda")
        ext.global_sumsq(x, partials, arrived, it + 1, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out,
                         hdl.rank, hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = sum(float(((torch.arange(n) % 7 - 3 + r + it) ** 2).sum()) for r in range(world))
        assert out.item() == expect, f"rank {rank}: sum of squares {out.item()} != {expect} in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
