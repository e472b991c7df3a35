"""An inline-CUDA candidate for the all_reduce task, as LLM-written candidates look: a load_inline
extension whose kernel barriers on the signal pads, sums every peer's symmetric buffer through
`buffer_ptrs_dev` and barriers again. PKB_CANDIDATE_BUG (read at call time, so one build serves the
tests) switches on one bug: "wrong_flag" (waits for a flag value nobody writes) or "skip_peer" (leaves
the last peer out of the sum)."""
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CPP_SRC = "torch::Tensor one_shot(int64_t bufs, int64_t pads, torch::Tensor out, int64_t rank, int64_t world, int64_t bug);"

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda/atomic>
#include <cstdint>

__device__ __forceinline__ void barrier(uint32_t** pads, int rank, int world, int channel, uint32_t expect) {
    __syncthreads();
    if (threadIdx.x < world) {
        cuda::atomic_ref<uint32_t, cuda::thread_scope_system> out(pads[threadIdx.x][channel * world + rank]);
        cuda::atomic_ref<uint32_t, cuda::thread_scope_system> in(pads[rank][channel * world + threadIdx.x]);
        uint32_t zero = 0;
        while (!out.compare_exchange_strong(zero, 1u, cuda::memory_order_release)) { zero = 0; }
        uint32_t want = expect;
        while (!in.compare_exchange_strong(want, 0u, cuda::memory_order_acquire)) { want = expect; }
    }
    __syncthreads();
}

__global__ void one_shot_kernel(float** bufs, uint32_t** pads, float* out, int n, int rank, int world, int bug) {
    barrier(pads, rank, world, blockIdx.x, bug == 1 ? 2u : 1u);
    const int peers = bug == 2 ? world - 1 : world;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < peers; ++p) acc += bufs[p][i];
        out[i] = acc;
    }
    barrier(pads, rank, world, blockIdx.x, 1u);
}

torch::Tensor one_shot(int64_t bufs, int64_t pads, torch::Tensor out, int64_t rank, int64_t world, int64_t bug) {
    TORCH_CHECK(out.is_cuda(), "out must be on the GPU");
    const int n = static_cast<int>(out.numel());
    const int blocks = std::min(4, (n + 255) / 256);
    one_shot_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<float**>(bufs), reinterpret_cast<uint32_t**>(pads), out.data_ptr<float>(), n,
        static_cast<int>(rank), static_cast<int>(world), static_cast<int>(bug));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(name="pkb_candidate_one_shot", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["one_shot"])
_BUGS = {"": 0, "wrong_flag": 1, "skip_peer": 2}


def solution(x):
    buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    buf.copy_(x)
    out = torch.empty_like(x)
    _ext.one_shot(hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size,
                  _BUGS[os.environ.get("PKB_CANDIDATE_BUG", "")])
    return out
