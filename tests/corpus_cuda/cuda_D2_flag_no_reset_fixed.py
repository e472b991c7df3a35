# pkb-corpus
# family: D2
# title: inline-CUDA one-shot all-reduce whose barrier flags are reset by the waiter once seen
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, atomicExch_system, ld.acquire.sys, __threadfence_system
# world_sizes: 2, 4
# expect: ok
# twin: cuda_D2_flag_no_reset_bug.py
# source: vllm-project/vllm#25892
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = "torch::Tensor all_reduce(int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world);"

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* addr) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(uint32_t* addr, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void set_flag(uint32_t* flag) {
    __threadfence_system();
    atomicExch_system(flag, 1u);
}

__device__ __forceinline__ void wait_flag(uint32_t* flag) {
    while (ld_acquire_sys(flag) == 0u) {
    }
    atomicExch_system(flag, 0u);  // consume the flag: the slot is reused by the next call
}

// slot channel * world + src of each pad: channel 0 = entry, 1 = exit
__device__ __forceinline__ void flag_barrier(uint32_t** pads, int rank, int world, int channel) {
    __syncthreads();
    if (threadIdx.x < world) {
        const int peer = threadIdx.x;
        set_flag(pads[peer] + channel * world + rank);
        wait_flag(pads[rank] + channel * world + peer);
    }
    __syncthreads();
}

__global__ void all_reduce_kernel(float** bufs, uint32_t** pads, float* out, int n, int rank, int world) {
    flag_barrier(pads, rank, world, 0);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) {
            acc += bufs[p][i];
        }
        out[i] = acc;
    }
    flag_barrier(pads, rank, world, 1);
}

torch::Tensor all_reduce(int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world) {
    TORCH_CHECK(out.is_cuda(), "out must be a CUDA tensor");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    all_reduce_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
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
    ext = load_inline(name="pkb_cuda_flag_all_reduce", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["all_reduce"])
    n = 1024
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 97
    outs = []
    for it in range(2):
        buf.copy_(base + rank + 100 * it)
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.all_reduce(hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, hdl.rank, hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = base.cpu() * world + world * (world - 1) // 2 + 100 * world * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong sum in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
