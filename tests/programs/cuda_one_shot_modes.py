"""One inline-CUDA extension, several behaviours (one build serves every test in test_cuda_*.py):
a one-shot all-reduce over `buffer_ptrs_dev` between signal-pad barriers (mode ok), and the same with
one bug each; and a grid barrier between the blocks of one launch, launched plainly (relies on
co-residency) or cooperatively. Usage: cuda_one_shot_modes.py MODE [ITERATIONS]."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

MODES = {"ok": 0, "wrong_flag": 1, "no_entry_barrier": 2, "table_overrun": 3, "relaxed_flags": 4,
         "fenced_relaxed_flags": 5, "block_fenced_relaxed_flags": 6}
GRID_MODES = {"co_residency": False, "cooperative": True}

CPP_SRC = """
torch::Tensor all_reduce(int64_t bufs, int64_t pads, torch::Tensor out, int64_t rank, int64_t world, int64_t mode);
torch::Tensor grid_barrier(torch::Tensor counter, torch::Tensor out, bool cooperative);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

__device__ uint32_t cas(uint32_t* addr, uint32_t cmp, uint32_t val, bool ordered) {
    uint32_t old;
    if (ordered) {
        asm volatile("atom.acq_rel.sys.global.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(addr), "r"(cmp), "r"(val) : "memory");
    } else {
        asm volatile("atom.relaxed.sys.global.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(addr), "r"(cmp), "r"(val) : "memory");
    }
    return old;
}

// thread t signals peer t (slot channel*world+rank of its pad) and consumes peer t's signal on its own pad
__device__ void barrier(uint32_t** pads, int rank, int world, int channel, uint32_t expect, int mode) {
    const bool ordered = mode < 4 || mode > 6;
    __syncthreads();
    if (threadIdx.x < world) {
        const int peer = threadIdx.x;
        if (mode == 5) __threadfence_system();
        if (mode == 6) __threadfence_block();
        while (cas(pads[peer] + channel * world + rank, 0u, 1u, ordered) != 0u) {
        }
        while (cas(pads[rank] + channel * world + peer, expect, 0u, ordered) != expect) {
        }
        if (mode == 5) __threadfence_system();
        if (mode == 6) __threadfence_block();
    }
    __syncthreads();
}

__global__ void all_reduce_kernel(float** bufs, uint32_t** pads, float* out, int n, int rank, int world, int mode) {
    if (mode != 2) barrier(pads, rank, world, 0, mode == 1 ? 2u : 1u, mode);
    const int peers = mode == 3 ? world + 1 : world;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < peers; ++p) {
            acc += bufs[p][i];
        }
        out[i] = acc;
    }
    barrier(pads, rank, world, 1, 1u, mode);
}

// every block waits until all blocks of the launch arrived: only legal when they are co-resident
__global__ void grid_barrier_kernel(unsigned int* counter, float* out) {
    if (threadIdx.x == 0) {
        atomicAdd(counter, 1u);
        while (atomicAdd(counter, 0u) < gridDim.x) {
        }
    }
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1.f;
}

torch::Tensor grid_barrier(torch::Tensor counter, torch::Tensor out, bool cooperative) {
    unsigned int* c = reinterpret_cast<unsigned int*>(counter.data_ptr<int>());
    float* o = out.data_ptr<float>();
    const dim3 grid(4), block(32);
    if (cooperative) {
        void* args[] = {&c, &o};
        C10_CUDA_CHECK(cudaLaunchCooperativeKernel((const void*)grid_barrier_kernel, grid, block, args, 0,
                                                   at::cuda::getCurrentCUDAStream()));
    } else {
        grid_barrier_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(c, o);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}

torch::Tensor all_reduce(int64_t bufs, int64_t pads, torch::Tensor out, int64_t rank, int64_t world, int64_t mode) {
    TORCH_CHECK(out.is_cuda() && out.is_contiguous(), "out must be a contiguous CUDA tensor");
    all_reduce_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<float**>(bufs), reinterpret_cast<uint32_t**>(pads), out.data_ptr<float>(),
        static_cast<int>(out.numel()), static_cast<int>(rank), static_cast<int>(world), static_cast<int>(mode));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_test_one_shot", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["all_reduce", "grid_barrier"])
    if sys.argv[1] in GRID_MODES:
        out = ext.grid_barrier(torch.zeros(1, dtype=torch.int32, device="cuda"),
                               torch.zeros(128, device="cuda"), GRID_MODES[sys.argv[1]])
        assert bool((out == 1).all()), f"rank {rank}: a block did not finish"
        dist.destroy_process_group()
        return
    mode = MODES[sys.argv[1]]
    n = int(os.environ.get("PKB_TEST_N", "1024"))
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 251
    for it in range(iterations):
        buf.copy_(base * (rank + 1) + it)
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.all_reduce(hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size, mode)
        expect = base * (world * (world + 1) // 2) + world * it
        assert torch.equal(out, expect), f"rank {rank}: wrong sum in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
