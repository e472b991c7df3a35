# pkb-corpus
# family: D4
# title: inline-CUDA ring push whose producer stores the volatile ready flag without __threadfence_system() after the data
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, volatile flags, __threadfence_system, spin loop
# world_sizes: 2, 4
# expect: protocol
# twin: cuda_D4_ring_push_no_fence_fixed.py
# source: vllm-project/vllm#2760
# bug_line: 44
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor ring_push(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, "
           "int64_t rank, int64_t world, int64_t seq);")

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>
constexpr int DATA_FLAG = 0;  // pad word 0: the round whose data the left neighbour put in this rank's buffer
constexpr int ACK_FLAG = 1;   // pad word 1: the round the right neighbour has consumed

__global__ void ring_push_kernel(const float* __restrict__ x, float** bufs, uint32_t** pads, float* out, int n, int rank,
                                 int world, uint32_t seq) {
    const int next = (rank + 1) % world;
    const int prev = (rank + world - 1) % world;
    volatile uint32_t* my_pad = pads[rank];
    if (threadIdx.x == 0) {
        while (my_pad[ACK_FLAG] < seq - 1) {  // the right neighbour consumed the previous round
        }
        __threadfence_system();
    }
    __syncthreads();
    float* dst = bufs[next];
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        dst[i] = x[i];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        // BUG: no __threadfence_system() here: the relaxed flag store may overtake the data stores
        reinterpret_cast<volatile uint32_t*>(pads[next])[DATA_FLAG] = seq;
        while (my_pad[DATA_FLAG] < seq) {  // the left neighbour's data for this round
        }
        __threadfence_system();
    }
    __syncthreads();
    const float* mine = bufs[rank];
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        out[i] = mine[i];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        reinterpret_cast<volatile uint32_t*>(pads[prev])[ACK_FLAG] = seq;  // this rank's buffer may be refilled
    }
}

torch::Tensor ring_push(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank,
                        int64_t world, int64_t seq) {
    TORCH_CHECK(x.is_cuda() && out.is_cuda(), "x and out must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && out.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(x.numel() == out.numel(), "x and out must have the same size");
    TORCH_CHECK(seq >= 1, "rounds are numbered from 1");
    ring_push_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads),
        out.data_ptr<float>(), static_cast<int>(x.numel()), static_cast<int>(rank), static_cast<int>(world),
        static_cast<uint32_t>(seq));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_ring_push", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["ring_push"])
    n = 1024
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    outs = []
    for it in range(2):
        x = torch.arange(n, dtype=torch.float32, device="cuda") + 1000 * rank + 10000 * it
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.ring_push(x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size, it + 1)
        outs.append(out)
    dist.barrier()
    left = (rank - 1) % world
    for it, out in enumerate(outs):
        expect = torch.arange(n, dtype=torch.float32) + 1000 * left + 10000 * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong data from rank {left} in round {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
