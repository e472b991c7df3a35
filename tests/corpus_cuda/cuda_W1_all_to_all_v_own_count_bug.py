# pkb-corpus
# family: W1
# title: inline-CUDA all-to-all with variable chunk sizes whose receiver copies its own send count instead of the count the sender stored: correctly synchronised, wrong output
# patterns: load_inline, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, peer stores, atom.release.sys.cas, atom.acquire.sys.cas
# world_sizes: 2, 4
# expect: error
# twin: cuda_W1_all_to_all_v_own_count_fixed.py
# source: https://docs.pytorch.org/docs/stable/distributed.html#torch.distributed.all_to_all_single
# bug_line: 70
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline
CPP_SRC = ("torch::Tensor all_to_all_v(torch::Tensor x, torch::Tensor send_counts, int64_t data_ptrs, int64_t count_ptrs, "
           "int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world);")

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

// all-to-all with variable chunk sizes by peer stores: rank r writes send_counts[d] (<= max_count) elements of its
// chunk for d into slot r of d's data buffer and the count into slot r of d's count buffer; after the barrier each
// rank copies, for every source s, the count that s sent of slot s into out[s * max_count ...]
__global__ void all_to_all_v_kernel(const float* x, const int* send_counts, float** data, int** counts,
                                    uint32_t** pads, float* out, int max_count, int rank, int world) {
    barrier_peers(pads, rank, world, 0);  // every rank has copied out the previous call's chunks
    for (int d = 0; d < world; ++d) {
        const int cnt = send_counts[d];
        for (int i = threadIdx.x; i < cnt; i += blockDim.x) {
            data[d][rank * max_count + i] = x[d * max_count + i];
        }
        if (threadIdx.x == 0) {
            counts[d][rank] = cnt;
        }
    }
    barrier_peers(pads, rank, world, 1);  // every chunk and count of this call has arrived
    for (int s = 0; s < world; ++s) {
        const int cnt = send_counts[s];  // BUG: this rank's own count for s, not the count s sent to this rank
        for (int i = threadIdx.x; i < cnt; i += blockDim.x) {
            out[s * max_count + i] = data[rank][s * max_count + i];
        }
    }
}

torch::Tensor all_to_all_v(torch::Tensor x, torch::Tensor send_counts, int64_t data_ptrs, int64_t count_ptrs,
                           int64_t signal_pads, torch::Tensor out, int64_t rank, int64_t world) {
    TORCH_CHECK(x.is_cuda() && send_counts.is_cuda() && out.is_cuda(), "x, send_counts and out must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x must be contiguous float32");
    TORCH_CHECK(out.scalar_type() == torch::kFloat32 && out.is_contiguous(), "out must be contiguous float32");
    TORCH_CHECK(send_counts.scalar_type() == torch::kInt32 && send_counts.numel() == world, "one int32 count per rank");
    TORCH_CHECK(x.numel() == out.numel() && x.numel() % world == 0, "x and out hold one chunk per rank");
    TORCH_CHECK(world <= 256, "one thread per peer in the barrier");
    all_to_all_v_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), send_counts.data_ptr<int>(), reinterpret_cast<float**>(data_ptrs),
        reinterpret_cast<int**>(count_ptrs), reinterpret_cast<uint32_t**>(signal_pads), out.data_ptr<float>(),
        static_cast<int>(x.numel() / world), static_cast<int>(rank), static_cast<int>(world));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def count(src, dst, max_count):
    return 1 + (5 * src + 3 * dst) % max_count


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_cuda_all_to_all_v", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["all_to_all_v"])
    max_count = 64
    data = symm_mem.empty(world * max_count, dtype=torch.float32, device="cuda")
    data_hdl = symm_mem.rendezvous(data, dist.group.WORLD)
    counts = symm_mem.empty(world, dtype=torch.int32, device="cuda")
    count_hdl = symm_mem.rendezvous(counts, dist.group.WORLD)
    send_counts = torch.tensor([count(rank, d, max_count) for d in range(world)], dtype=torch.int32, device="cuda")
    pos = torch.arange(max_count, dtype=torch.float32)
    outs = []
    for it in range(2):
        x = torch.cat([pos + 1000 * rank + 100 * d + 10000 * it for d in range(world)]).cuda()
        out = torch.full((world * max_count,), -1.0, dtype=torch.float32, device="cuda")
        ext.all_to_all_v(x, send_counts, data_hdl.buffer_ptrs_dev, count_hdl.buffer_ptrs_dev,
                         data_hdl.signal_pad_ptrs_dev, out, data_hdl.rank, data_hdl.world_size)
        outs.append(out)
    dist.barrier()
    for it, out in enumerate(outs):
        expect = torch.full((world, max_count), -1.0)
        for s in range(world):
            c = count(s, rank, max_count)
            expect[s, :c] = pos[:c] + 1000 * s + 100 * rank + 10000 * it
        assert torch.equal(out.cpu(), expect.flatten()), f"rank {rank}: wrong all-to-all chunks in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
