"""Gather to rank 0, out of place.

Rank 0 (the root) returns every rank's tensor stacked in rank order, shape (world_size, m, n); the other
ranks return their own input unchanged (a copy, shape (m, n)), so every rank's output is checkable. This is
collecting per-rank results on one rank: evaluation outputs, sharded state gathered for a rank-0
checkpoint (FSDP full_state_dict with rank0_only), DINOv2's distributed kNN evaluation. The collective
only moves data, so the comparison is exact.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "gather"
ID = 7
TITLE = "Gather to rank 0, out of place"
CATEGORY = "collective"
ORIGIN = "NCCL send/recv gather / torch.distributed.gather (rank-0 checkpoint and evaluation gathers)"
WORLD_SIZES = WorldSizes(min=2)
ROOT = 0
SIZES = {"screen": {"m": 16, "n": 64},
         "full": {"m": 2048, "n": 4096}}  # full: 32 MiB of fp32 per rank, 256 MiB on the root at 8 ranks
OUTPUTS = [Output("out", torch.float32, rtol=0.0, atol=0.0,  # data movement only: bit-exact
                  shape=lambda size, world_size, rank: ((world_size,) if rank == ROOT else ())
                  + (size["m"], size["n"]))]


def make_inputs(ctx):
    return (ctx.randn(ctx.size["m"], ctx.size["n"]),)


def reference(x):
    if dist.get_rank() != ROOT:
        dist.gather(x, None, dst=ROOT)
        return x.clone()
    out = x.new_empty((dist.get_world_size(), *x.shape))
    dist.gather(x, list(out.unbind(0)), dst=ROOT)
    return out


def speed_of_light(size, world_size):
    # the root's link is the bottleneck: it receives every other rank's tensor
    return {"link_bytes_per_rank": (world_size - 1) * size["m"] * size["n"] * 4, "flops": 0}
