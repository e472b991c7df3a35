# pkb-corpus
# family: D2
# title: inline-CUDA LL all-gather (float + per-call flag in one 8-byte volatile store, two buffers by call parity) whose flag is the call number
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, st.volatile.v2.u32, ld.volatile.v2.u32, LL protocol, spin loop
# world_sizes: 2, 4
# expect: ok
# twin: cuda_D2_ll_flag_constant_bug.py
# source: vllm-project/vllm#25892
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor ll_all_gather(torch::Tensor x, int64_t buffer_ptrs, torch::Tensor out, int64_t rank, "
           "int64_t world, int64_t seq);")

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

// LL (low-latency) protocol: every 8-byte line carries one float and the flag of the call that wrote it, stored
// and loaded as one 8-byte access, so a reader that sees the flag sees the data. Two line buffers alternate by
// call parity; line (b, src, i) of a rank's buffer is element i of rank src in buffer b
__device__ __forceinline__ void st_ll(uint64_t* addr, uint32_t data, uint32_t flag) {
    asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" :: "l"(addr), "r"(data), "r"(flag) : "memory");
}

__device__ __forceinline__ uint2 ld_ll(const uint64_t* addr) {
    uint2 v;
    asm volatile("ld.volatile.global.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(addr) : "memory");
    return v;
}

__global__ void ll_all_gather_kernel(const float* x, uint64_t** bufs, float* out, int n, int rank, int world,
                                     uint32_t seq) {
    const int b = seq & 1;
    const uint32_t flag = seq;  // a new flag value every call: lines of an earlier call never match
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < world * n; idx += gridDim.x * blockDim.x) {
        const int peer = idx / n, i = idx % n;
        st_ll(bufs[peer] + (b * world + rank) * n + i, __float_as_uint(x[i]), flag);
    }
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < world * n; idx += gridDim.x * blockDim.x) {
        const int src = idx / n, i = idx % n;
        uint2 v;
        do {
            v = ld_ll(bufs[rank] + (b * world + src) * n + i);
        } while (v.y != flag);
        out[idx] = __uint_as_float(v.x);
    }
}

torch::Tensor ll_all_gather(torch::Tensor x, int64_t buffer_ptrs, torch::Tensor out, int64_t rank, int64_t world,
                            int64_t seq) {
    TORCH_CHECK(x.is_cuda() && out.is_cuda(), "x and out must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x must be contiguous float32");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    TORCH_CHECK(out.numel() == world * x.numel(), "out holds one block per rank");
    TORCH_CHECK(seq > 0, "flag 0 is the initial state of the line buffers");
    ll_all_gather_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), reinterpret_cast<uint64_t**>(buffer_ptrs), out.data_ptr<float>(),
        static_cast<int>(x.numel()), static_cast<int>(rank), static_cast<int>(world), static_cast<uint32_t>(seq));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_ll_all_gather", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["ll_all_gather"])
    n = 128
    lines = symm_mem.empty(2 * world * n, dtype=torch.int64, device="cuda")  # two LL buffers of world * n lines
    hdl = symm_mem.rendezvous(lines, dist.group.WORLD)
    lines.zero_()  # flag 0: no call has written a line yet
    dist.barrier()
    outs = []
    for it in range(3):
        x = torch.arange(n, dtype=torch.float32, device="cuda") + 1000 * rank + 10000 * it
        out = torch.empty(world * n, dtype=torch.float32, device="cuda")
        ext.ll_all_gather(x, hdl.buffer_ptrs_dev, out, hdl.rank, hdl.world_size, it + 1)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = torch.cat([torch.arange(n, dtype=torch.float32) + 1000 * r + 10000 * it for r in range(world)])
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong gathered lines in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
