"""What the candidate's C++ host code meets of the CUDA runtime on a simulated rank (one build).

Its device: `x.get_device()` and `cudaGetDevice` answer the rank's current device, as on the GPU the rank
owns. Mode "set": each rank calls torch.cuda.set_device(LOCAL_RANK) first (both must say LOCAL_RANK); mode
"unset": it never does (both say 0 on every rank, as a GPU process's device 0). The stand-in runtime kept one
current device per thread, starting at 0, so rank 1 heard 0.
A runtime call the stand-in lacks: mode "graph" calls cudaGraphCreate, which the GPU has; it is pkb's limit
(not simulated), never the candidate's error.
Usage: cuda_host_runtime.py MODE."""
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

CPP_SRC = "std::vector<int64_t> devices(torch::Tensor x);\nvoid graph();"

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

std::vector<int64_t> devices(torch::Tensor x) {
    int d = -1;
    cudaGetDevice(&d);
    return {static_cast<int64_t>(x.get_device()), static_cast<int64_t>(d)};
}

void graph() {
    cudaGraph_t g;
    TORCH_CHECK(cudaGraphCreate(&g, 0) == cudaSuccess, "cudaGraphCreate failed");
}
"""


def main():
    dist.init_process_group("nccl" if sys.argv[1] != "unset" else "gloo")  # NCCL needs the device set
    local = int(os.environ["LOCAL_RANK"])
    if sys.argv[1] != "unset":
        torch.cuda.set_device(local)
    ext = load_inline(name="pkb_test_host_runtime", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["devices", "graph"])
    if sys.argv[1] == "graph":
        ext.graph()
    x = torch.ones(4, device="cuda")
    tensor_device, runtime_device = ext.devices(x)
    want = local if sys.argv[1] != "unset" else 0
    assert (tensor_device, runtime_device) == (want, want), (dist.get_rank(), tensor_device, runtime_device, want)
    print(f"rank {dist.get_rank()} device {runtime_device}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
