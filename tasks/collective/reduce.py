"""Reduce (sum) to rank 0, out of place.

Rank 0 (the root) returns the elementwise sum of every rank's tensor. The other ranks return their own
input unchanged (a copy): that is what `torch.distributed.reduce` leaves in a non-root rank's buffer with
NCCL, and it keeps every rank's output checkable; a solution must neither corrupt nor drop it.
DeepSpeed ZeRO-1/2 (`average_tensor` without reduce-scatter) reduces each gradient slice to the rank that
owns its optimizer partition this way; logging code reduces losses and metrics to rank 0.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "reduce"
ID = 6
TITLE = "Reduce (sum) to rank 0, out of place"
CATEGORY = "collective"
ORIGIN = "NCCL ncclReduce / torch.distributed.reduce (DeepSpeed ZeRO-1/2 gradient slices reduced to their owner)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {"screen": {"n": 4096}, "full": {"n": 64 * 2**20}}  # full: 256 MiB of fp32
OUTPUTS = [Output("out", torch.float32, shape=lambda size, world_size, rank: (size["n"],))]
ROOT = 0


def make_inputs(ctx):
    return (ctx.randn(ctx.size["n"]),)


def reference(x):
    out = x.clone()
    dist.reduce(out, dst=ROOT)  # NCCL only writes the root's buffer: the others keep their input
    return out


def speed_of_light(size, world_size):
    # pipelined (ring/tree) reduce: every rank sends the tensor's size once
    return {"link_bytes_per_rank": size["n"] * 4, "flops": 0}
