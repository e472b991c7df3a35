"""Scatter from rank 0, out of place: rank r returns chunk r of rank 0's tensor.

Every rank passes a tensor of shape (world_size, m, n) (one signature for all ranks), but only the root's
is read: rank r returns root's x[r], shape (m, n). The other ranks' inputs are random, so returning a chunk
of one's own input (skipping the scatter) fails. This is distributing data that exists on one rank only:
a checkpoint loaded on rank 0 and split into shards (FSDP/DTensor rank-0 loading, `mesh_scatter`), a batch
read by one loader rank. The collective only moves data, so the comparison is exact.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "scatter"
ID = 8
TITLE = "Scatter from rank 0, out of place"
CATEGORY = "collective"
ORIGIN = "NCCL send/recv scatter / torch.distributed.scatter (rank-0 checkpoint loading split into shards)"
WORLD_SIZES = WorldSizes(min=2)
ROOT = 0
SIZES = {"screen": {"m": 16, "n": 64},
         "full": {"m": 2048, "n": 4096}}  # full: 32 MiB fp32 chunk per rank, 256 MiB on the root at 8 ranks
OUTPUTS = [Output("out", torch.float32, rtol=0.0, atol=0.0,  # data movement only: bit-exact
                  shape=lambda size, world_size, rank: (size["m"], size["n"]))]


def make_inputs(ctx):
    return (ctx.randn(ctx.world_size, ctx.size["m"], ctx.size["n"]),)


def reference(x):
    out = x.new_empty(x.shape[1:])
    dist.scatter(out, list(x.unbind(0)) if dist.get_rank() == ROOT else None, src=ROOT)
    return out


def speed_of_light(size, world_size):
    # the root's link is the bottleneck: it sends every other rank's chunk
    return {"link_bytes_per_rank": (world_size - 1) * size["m"] * size["n"] * 4, "flops": 0}
