"""An inline-CUDA candidate for the all_reduce task that moves data with the runtime's copies, not a kernel:
each rank pushes its input into its own slot of every peer's symmetric buffer with cudaMemcpyAsync (peer
access over NVLink), the ranks barrier, and each sums the slots of its own buffer; a barrier at exit keeps
the next call's pushes out of a buffer a peer still sums. PKB_CANDIDATE_BUG (read at call time, so one build
serves the tests) switches on one bug: "no_barrier" (sums before the peers' pushes are ordered before it)
or "overrun" (each push runs one element past the peer's buffer)."""
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CPP_SRC = "void push(torch::Tensor x, std::vector<int64_t> peers, int64_t rank, int64_t extra);"

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <vector>

void push(torch::Tensor x, std::vector<int64_t> peers, int64_t rank, int64_t extra) {
    const size_t bytes = x.numel() * sizeof(float);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    for (int64_t base : peers) {
        char* slot = reinterpret_cast<char*>(base) + rank * bytes;
        C10_CUDA_CHECK(cudaMemcpyAsync(slot, x.data_ptr<float>(), bytes + extra * sizeof(float),
                                       cudaMemcpyDeviceToDevice, stream));
    }
}
"""

_ext = load_inline(name="pkb_candidate_memcpy_push", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["push"])
_STATE: dict = {}


def solution(x):
    bug = os.environ.get("PKB_CANDIDATE_BUG", "")
    world = dist.get_world_size()
    if "hdl" not in _STATE:
        buf = symm_mem.empty(world * x.numel(), dtype=x.dtype, device=x.device)
        _STATE["buf"], _STATE["hdl"] = buf, symm_mem.rendezvous(buf, dist.group.WORLD)
    buf, hdl = _STATE["buf"], _STATE["hdl"]
    _ext.push(x.contiguous(), list(hdl.buffer_ptrs), hdl.rank, 1 if bug == "overrun" else 0)
    if bug != "no_barrier":
        hdl.barrier(channel=0)
    out = buf.view(world, -1).sum(dim=0).view_as(x)
    hdl.barrier(channel=1)
    return out
