"""One inline-CUDA extension, two behaviours: an all-reduce whose kernel takes the peers' buffers as a
struct of pointers passed by value and indexed by a loop (nvcc reads a large by-value struct in place, at a
computed parameter address), between epoch-flag barriers on the signal pads. Mode "aligned" computes a
flag's address as pad + rank * sizeof(int); mode "byte_offset" adds the rank as a byte offset before the
cast to int* (the flag of every odd rank is misaligned: on the GPU, "misaligned address").
Usage: cuda_peer_struct_flags.py MODE."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CPP_SRC = """
torch::Tensor all_reduce(std::vector<int64_t> bufs, int64_t pads, torch::Tensor out, int64_t rank, int64_t epoch,
                         int64_t stride);
"""

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

struct Peers { const float* p[32]; };

// thread t publishes the epoch on peer t's pad and waits until peer t published it on this rank's pad
__device__ void barrier(char** pads, int rank, int world, int channel, unsigned epoch, int stride) {
    __syncthreads();
    if (threadIdx.x < world) {
        const int peer = threadIdx.x;
        unsigned* out = (unsigned*)(pads[peer] + (channel * 32 + rank) * stride);
        unsigned* in = (unsigned*)(pads[rank] + (channel * 32 + peer) * stride);
        asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(out), "r"(epoch) : "memory");
        unsigned seen = 0;
        do {
            asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(seen) : "l"(in) : "memory");
        } while (seen < epoch);
    }
    __syncthreads();
}

__global__ void all_reduce_kernel(Peers peers, char** pads, float* out, int n, int rank, int world, unsigned epoch,
                                  int stride) {
    barrier(pads, rank, world, 0, epoch, stride);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < world; ++p) {
            acc += peers.p[p][i];
        }
        out[i] = acc;
    }
    barrier(pads, rank, world, 1, epoch, stride);
}

torch::Tensor all_reduce(std::vector<int64_t> bufs, int64_t pads, torch::Tensor out, int64_t rank, int64_t epoch,
                         int64_t stride) {
    TORCH_CHECK(out.is_cuda() && bufs.size() <= 32, "out must be a CUDA tensor, at most 32 peers");
    Peers peers{};
    for (size_t i = 0; i < bufs.size(); ++i) peers.p[i] = reinterpret_cast<const float*>(bufs[i]);
    all_reduce_kernel<<<1, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
        peers, reinterpret_cast<char**>(pads), out.data_ptr<float>(), static_cast<int>(out.numel()),
        static_cast<int>(rank), static_cast<int>(bufs.size()), static_cast<unsigned>(epoch), static_cast<int>(stride));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

STRIDES = {"aligned": 4, "byte_offset": 1}


def main():
    stride = STRIDES[sys.argv[1]]
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_test_peer_struct", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["all_reduce"])
    n = 512
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 97
    for it in range(2):
        buf.copy_(base * (rank + 1) + it)
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        ext.all_reduce(list(hdl.buffer_ptrs), hdl.signal_pad_ptrs_dev, out, rank, it + 1, stride)
        expect = base * (world * (world + 1) // 2) + world * it
        assert torch.equal(out, expect), f"rank {rank}: wrong sum in call {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
