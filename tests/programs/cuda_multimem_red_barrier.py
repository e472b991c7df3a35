"""A barrier made of one multicast reduction per rank: each rank adds 1 to a counter on every rank at once
(`multimem.red.release.sys.global.add.u32` on the counter's multicast address), waits until its own copy
reaches world * epoch (`ld.acquire.sys`), then sums its peers' data. The reductions of different ranks
are atomics on the same word, not a write-write race. Mode "barrier" waits; mode "no_wait" skips the
wait, so the peer reads are stale reads (a race). Modes "relaxed_next_kernel" and "relaxed_same_kernel"
wait with a relaxed load (as ThunderKittens' barrier does) and read the peers in the next kernel (ordered:
a kernel's end orders what it polled before the stream's next kernel) or in the same kernel after the
wait (a race: the relaxed poll acquires nothing). Mode "reusable" calls a ThunderKittens-style reusable counter
barrier (arrive on every rank, wait until the own counter is exactly world, subtract world) four times back to
back around peer puts, with no host synchronisation: correct on the GPU, where a spinning rank sees the
counter at world long before a peer's next arrival lands. Mode "reusable_no_reset" never subtracts, so the
second barrier waits for world while the counter passes 2 * world: a real deadlock.
Usage: cuda_multimem_red_barrier.py MODE."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CPP_SRC = """
torch::Tensor sum_peers(int64_t counter_mc, int64_t counter, std::vector<int64_t> bufs, torch::Tensor out,
                        int64_t epoch, int64_t wait);
torch::Tensor sum_peers_relaxed(int64_t counter_mc, int64_t counter, std::vector<int64_t> bufs, torch::Tensor out,
                                int64_t epoch, int64_t next_kernel);
torch::Tensor reusable_barrier_sums(int64_t counter_mc, int64_t counter, std::vector<int64_t> bufs, torch::Tensor out,
                                    int64_t rank, int64_t reset);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

struct Peers { const float* p[16]; };

__global__ void sum_peers_kernel(unsigned* counter_mc, unsigned* counter, Peers peers, float* out, int n, int world,
                                 unsigned epoch, int wait) {
    if (threadIdx.x == 0) {
        asm volatile("multimem.red.release.sys.global.add.u32 [%0], %1;" :: "l"(counter_mc), "r"(1u) : "memory");
        unsigned seen = 0;
        if (wait) {
            do {
                asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
            } while (seen < epoch * world);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) acc += peers.p[p][i];
        out[i] = acc;
    }
}

__global__ void arrive_wait_relaxed(unsigned* counter_mc, unsigned* counter, unsigned target) {
    asm volatile("multimem.red.release.sys.global.add.u32 [%0], %1;" :: "l"(counter_mc), "r"(1u) : "memory");
    unsigned seen = 0;
    do {
        asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen < target);
}

__global__ void arrive_wait_relaxed_then_sum(unsigned* counter_mc, unsigned* counter, unsigned target, Peers peers,
                                             float* out, int n, int world) {
    if (threadIdx.x == 0) {
        asm volatile("multimem.red.release.sys.global.add.u32 [%0], %1;" :: "l"(counter_mc), "r"(1u) : "memory");
        unsigned seen = 0;
        do {
            asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
        } while (seen < target);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) acc += peers.p[p][i];
        out[i] = acc;
    }
}

__global__ void sum_only(Peers peers, float* out, int n, int world) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) acc += peers.p[p][i];
        out[i] = acc;
    }
}

__global__ void counter_barrier(int* counter_mc, int* counter, int world, int reset) {
    asm volatile("multimem.red.release.sys.global.add.s32 [%0], %1;" :: "l"(counter_mc), "r"(1) : "memory");
    int seen = 0;
    do {
        asm volatile("ld.relaxed.sys.global.s32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen != world);
    if (reset) asm volatile("red.release.sys.global.add.s32 [%0], %1;" :: "l"(counter), "r"(-world) : "memory");
}

struct Slots { float* p[16]; };

__global__ void put_own_slot(Slots slots, float value, int rank, int world) {
    if (threadIdx.x < world) slots.p[threadIdx.x][rank] = value;
}

__global__ void sum_slots(const float* slots, float* out, int world) {
    float acc = 0.f;
    for (int p = 0; p < world; ++p) acc += slots[p];
    *out = acc;
}

torch::Tensor reusable_barrier_sums(int64_t counter_mc, int64_t counter, std::vector<int64_t> bufs, torch::Tensor out,
                                    int64_t rank, int64_t reset) {
    Slots slots{};
    int world = static_cast<int>(bufs.size());
    for (int i = 0; i < world; ++i) slots.p[i] = reinterpret_cast<float*>(bufs[i]);
    auto stream = at::cuda::getCurrentCUDAStream();
    int* mc = reinterpret_cast<int*>(counter_mc);
    int* own = reinterpret_cast<int*>(counter);
    for (int c = 0; c < out.numel(); ++c) {
        counter_barrier<<<1, 1, 0, stream>>>(mc, own, world, static_cast<int>(reset));
        put_own_slot<<<1, 32, 0, stream>>>(slots, static_cast<float>((rank + 1) * (c + 1)), static_cast<int>(rank), world);
        counter_barrier<<<1, 1, 0, stream>>>(mc, own, world, static_cast<int>(reset));
        sum_slots<<<1, 1, 0, stream>>>(slots.p[rank], out.data_ptr<float>() + c, world);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor sum_peers_relaxed(int64_t counter_mc, int64_t counter, std::vector<int64_t> bufs, torch::Tensor out,
                                int64_t epoch, int64_t next_kernel) {
    Peers peers{};
    for (size_t i = 0; i < bufs.size(); ++i) peers.p[i] = reinterpret_cast<const float*>(bufs[i]);
    auto stream = at::cuda::getCurrentCUDAStream();
    unsigned target = static_cast<unsigned>(epoch * bufs.size());
    if (next_kernel) {
        arrive_wait_relaxed<<<1, 1, 0, stream>>>(reinterpret_cast<unsigned*>(counter_mc),
                                                 reinterpret_cast<unsigned*>(counter), target);
        sum_only<<<1, 64, 0, stream>>>(peers, out.data_ptr<float>(), static_cast<int>(out.numel()),
                                       static_cast<int>(bufs.size()));
    } else {
        arrive_wait_relaxed_then_sum<<<1, 64, 0, stream>>>(
            reinterpret_cast<unsigned*>(counter_mc), reinterpret_cast<unsigned*>(counter), target, peers,
            out.data_ptr<float>(), static_cast<int>(out.numel()), static_cast<int>(bufs.size()));
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor sum_peers(int64_t counter_mc, int64_t counter, std::vector<int64_t> bufs, torch::Tensor out,
                        int64_t epoch, int64_t wait) {
    Peers peers{};
    for (size_t i = 0; i < bufs.size(); ++i) peers.p[i] = reinterpret_cast<const float*>(bufs[i]);
    sum_peers_kernel<<<1, 64, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<unsigned*>(counter_mc), reinterpret_cast<unsigned*>(counter), peers, out.data_ptr<float>(),
        static_cast<int>(out.numel()), static_cast<int>(bufs.size()), static_cast<unsigned>(epoch),
        static_cast<int>(wait));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def main():
    mode = sys.argv[1]
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_test_multimem_red", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["sum_peers", "sum_peers_relaxed", "reusable_barrier_sums"])
    n = 256
    counter = symm_mem.empty(1, dtype=torch.int32, device="cuda").zero_()
    chdl = symm_mem.rendezvous(counter, dist.group.WORLD)
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    dist.barrier()
    buf.fill_(float(rank + 1))
    if mode.startswith("reusable"):
        sums = torch.zeros(4, dtype=torch.float32, device="cuda")
        ext.reusable_barrier_sums(chdl.multicast_ptr, counter.data_ptr(), list(hdl.buffer_ptrs), sums, rank,
                                  int(mode == "reusable"))
        expected = torch.arange(1, 5, dtype=torch.float32) * (world * (world + 1) // 2)
        assert torch.equal(sums.cpu(), expected), f"rank {rank}: sums {sums.tolist()}"
        dist.barrier()
        dist.destroy_process_group()
        return
    out = torch.empty(n, dtype=torch.float32, device="cuda")
    if mode in ("barrier", "no_wait"):
        ext.sum_peers(chdl.multicast_ptr, counter.data_ptr(), list(hdl.buffer_ptrs), out, 1, int(mode == "barrier"))
    else:
        ext.sum_peers_relaxed(chdl.multicast_ptr, counter.data_ptr(), list(hdl.buffer_ptrs), out, 1,
                              int(mode == "relaxed_next_kernel"))
    assert torch.equal(out, torch.full((n,), float(world * (world + 1) // 2))), f"rank {rank}: wrong sum"
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
