"""Sum of a tensor over all ranks, out of place: the gradient all-reduce of data-parallel training."""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "all_reduce"
ID = 1
TITLE = "All-reduce (sum), out of place"
CATEGORY = "collective"
ORIGIN = "NCCL ncclAllReduce / torch.distributed.all_reduce (DDP gradient reduction)"
WORLD_SIZES = WorldSizes(min=1)  # 1: the sum over one rank; scored on single-GPU nodes too
SIZES = {"screen": {"n": 4096}, "full": {"n": 64 * 2**20}}  # full: 256 MiB of fp32
OUTPUTS = [Output("out", torch.float32)]


def make_inputs(ctx):
    return (ctx.randn(ctx.size["n"]),)


def reference(x):
    out = x.clone()
    dist.all_reduce(out)
    return out


def speed_of_light(size, world_size):
    nbytes = size["n"] * 4
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * nbytes, "flops": 0}
