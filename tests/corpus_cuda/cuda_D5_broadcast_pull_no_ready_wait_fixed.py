# pkb-corpus
# family: D5
# title: inline-CUDA broadcast by peer loads: non-root ranks wait for the root's st.release.sys ready flag before reading its buffer
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, peer loads, st.release.sys, ld.acquire.sys, spin loop
# world_sizes: 2, 4
# expect: ok
# twin: cuda_D5_broadcast_pull_no_ready_wait_bug.py
# source: https://docs.nvidia.com/nvshmem/release-notes-install-guide/best-practice-guide/cuda-nvshmem-interop.html
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor broadcast(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, "
           "int64_t root, int64_t rank, int64_t world, int64_t seq);")

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
constexpr int READY = 0;  // pad word 0 of a non-root rank: the last call whose data the root has staged
constexpr int DONE = 1;   // pad word 1 + p of the root: the last call rank p has finished reading

// broadcast by peer loads: the root stages x in its symmetric buffer and publishes the call number to every
// other rank; each of them waits for it, copies the root's buffer and reports back; the root returns only when
// every rank has read its buffer (the next call may overwrite it)
__global__ void broadcast_kernel(const float* x, float** bufs, uint32_t** pads, float* out, int n, int root, int rank,
                                 int world, uint32_t seq) {
    if (rank == root) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            bufs[root][i] = x[i];
            out[i] = x[i];
        }
        __syncthreads();
        if (threadIdx.x < world && threadIdx.x != root) {
            st_release_sys(pads[threadIdx.x] + READY, seq);
            while (ld_acquire_sys(pads[root] + DONE + threadIdx.x) < seq) {
            }
        }
        __syncthreads();
        return;
    }
    if (threadIdx.x == 0) {
        while (ld_acquire_sys(pads[rank] + READY) < seq) {
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        out[i] = bufs[root][i];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        st_release_sys(pads[root] + DONE + rank, seq);
    }
}

torch::Tensor broadcast(torch::Tensor x, int64_t buffer_ptrs, int64_t signal_pads, torch::Tensor out, int64_t root,
                        int64_t rank, int64_t world, int64_t seq) {
    TORCH_CHECK(x.is_cuda() && out.is_cuda(), "x and out must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x must be contiguous float32");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    TORCH_CHECK(x.numel() == out.numel(), "x and out must have the same size");
    TORCH_CHECK(world <= 256 && root >= 0 && root < world, "bad root or world size");
    broadcast_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), reinterpret_cast<float**>(buffer_ptrs), reinterpret_cast<uint32_t**>(signal_pads),
        out.data_ptr<float>(), static_cast<int>(out.numel()), static_cast<int>(root), static_cast<int>(rank),
        static_cast<int>(world), static_cast<uint32_t>(seq));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_broadcast_pull", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["broadcast"])
    n, root = 1024, 1
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 97
    outs = []
    for it in range(2):
        x = base * (rank + 1) + 100 * it
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.broadcast(x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, root, hdl.rank, hdl.world_size, it + 1)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = base.cpu() * (root + 1) + 100 * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong broadcast in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
