# pkb-corpus
# family: D4
# title: inline-CUDA one-shot all-reduce whose barrier signals with atom.release.sys.cas and waits with atom.acquire.sys.cas
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, atom.release.sys.cas, atom.relaxed.sys.cas
# world_sizes: 2, 4
# expect: ok
# twin: cuda_D4_relaxed_cas_signal_bug.py
# source: vllm-project/vllm#57059
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor one_shot_all_reduce(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, "
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
__global__ void one_shot_all_reduce_kernel(const float* __restrict__ x, float** bufs, uint32_t** pads, float* out, int n,
                                           int rank, int world) {
    const int per_block = (n + gridDim.x - 1) / gridDim.x;
    const int begin = blockIdx.x * per_block;
    const int end = min(n, begin + per_block);
    float* mine = bufs[rank];
    for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
        mine[i] = x[i];  // stage this rank's input in its symmetric buffer
    }
    barrier_peers(pads, rank, world, blockIdx.x);  // every rank staged its input
    for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) {
            acc += bufs[p][i];
        }
        out[i] = acc;
    }
    barrier_peers(pads, rank, world, blockIdx.x);  // the peers are done with this rank's buffer
}

torch::Tensor one_shot_all_reduce(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank,
                                  int64_t world) {
    TORCH_CHECK(x.is_cuda() && out.is_cuda(), "x and out must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && out.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(), "x and out: same size, contiguous");
    const int n = static_cast<int>(x.numel());
    one_shot_all_reduce_kernel<<<2, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads),
        out.data_ptr<float>(), n, static_cast<int>(rank), static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_one_shot_staged", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["one_shot_all_reduce"])
    n = 1024
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 127
    outs = []
    for it in range(3):
        x = base * (rank + 1) + 10 * it
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.one_shot_all_reduce(x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = base.cpu() * (world * (world + 1) // 2) + 10 * world * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong one-shot sum in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
