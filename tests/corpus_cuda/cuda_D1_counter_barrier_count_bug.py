# pkb-corpus
# family: D1
# title: inline-CUDA counter barrier that waits for world arrivals per epoch while only the world-1 other ranks add to the counter
# patterns: load_inline, symm_mem.rendezvous, signal_pad_ptrs_dev, buffer_ptrs_dev, atomicAdd_system, __threadfence_system, spin loop
# world_sizes: 2, 4
# expect: protocol
# twin: cuda_D1_counter_barrier_count_fixed.py
# source: microsoft/mscclpp#806
# bug_line: 35
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = """
void counter_barrier(int64_t signal_pads, int64_t rank, int64_t world, int64_t epoch);
torch::Tensor gather_peers(int64_t buffer_ptrs, torch::Tensor out, int64_t rank, int64_t world);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>
constexpr int COUNTER = 0;  // pad word 0 of each rank counts the arrivals of the other ranks

__global__ void counter_barrier_kernel(uint32_t** pads, int rank, int world, uint32_t epoch) {
    if (threadIdx.x < world && threadIdx.x != rank) {
        __threadfence_system();
        atomicAdd_system(pads[threadIdx.x] + COUNTER, 1u);  // one arrival at every other rank
    }
    if (threadIdx.x == 0) {
        // BUG: counts this rank too, but a rank never adds to its own counter: the wait never ends
        const uint32_t expected = world * epoch;
        while (atomicAdd_system(pads[rank] + COUNTER, 0u) < expected) {
        }
        __threadfence_system();
    }
    __syncthreads();
}

// all-gather by peer loads: out[p * n + i] = buffer of rank p, element i
__global__ void gather_peers_kernel(float** bufs, float* out, int n, int world) {
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < world * n; idx += gridDim.x * blockDim.x) {
        out[idx] = bufs[idx / n][idx % n];
    }
}

void counter_barrier(int64_t signal_pads, int64_t rank, int64_t world, int64_t epoch) {
    TORCH_CHECK(world <= 32, "one warp signals all peers");
    counter_barrier_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<uint32_t**>(signal_pads), static_cast<int>(rank), static_cast<int>(world),
        static_cast<uint32_t>(epoch));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor gather_peers(int64_t buffer_ptrs, torch::Tensor out, int64_t rank, int64_t world) {
    TORCH_CHECK(out.is_cuda(), "out must be a CUDA tensor");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    TORCH_CHECK(out.numel() % world == 0, "out holds one block per rank");
    gather_peers_kernel<<<2, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<float**>(buffer_ptrs), out.data_ptr<float>(), static_cast<int>(out.numel() / world),
        static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_counter_barrier", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["counter_barrier", "gather_peers"])
    n = 256
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    epoch = 0
    outs = []
    for it in range(2):
        buf.copy_(torch.arange(n, dtype=torch.float32, device="cuda") + 1000 * rank + 10000 * it)
        epoch += 1
        ext.counter_barrier(hdl.signal_pad_ptrs_dev, hdl.rank, hdl.world_size, epoch)  # every buffer is filled
        out = torch.empty(world * n, dtype=torch.float32, device="cuda")
        ext.gather_peers(hdl.buffer_ptrs_dev, out, hdl.rank, hdl.world_size)
        outs.append(out)
        epoch += 1
        ext.counter_barrier(hdl.signal_pad_ptrs_dev, hdl.rank, hdl.world_size, epoch)  # every rank has read
    dist.barrier()
    for it, out in enumerate(outs):
        expect = torch.cat([torch.arange(n, dtype=torch.float32) + 1000 * r + 10000 * it for r in range(world)])
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong gathered buffers in round {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
