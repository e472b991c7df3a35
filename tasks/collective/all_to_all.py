"""All-to-all with equal chunks, out of place: chunk j of this rank goes to rank j.

The input has shape (world_size, m, n); the output has the same shape and out[j] is rank j's x[rank]
(a transpose of the rank and chunk axes across the world). This is the exchange of DeepSpeed-Ulysses
sequence parallelism (scatter heads, gather sequence) and of MoE expert dispatch with balanced routing.
The collective only moves data, so the comparison is exact.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "all_to_all"
ID = 4
TITLE = "All-to-all with equal chunks, out of place"
CATEGORY = "collective"
ORIGIN = "NCCL all-to-all / torch.distributed.all_to_all_single (DeepSpeed-Ulysses sequence parallelism)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {"screen": {"m": 16, "n": 64},
         "full": {"m": 2048, "n": 2048}}  # full: 16 MiB fp32 chunks, 128 MiB per rank at 8 ranks
OUTPUTS = [Output("out", torch.float32, rtol=0.0, atol=0.0,  # data movement only: bit-exact
                  shape=lambda size, world_size, rank: (world_size, size["m"], size["n"]))]


def make_inputs(ctx):
    return (ctx.randn(ctx.world_size, ctx.size["m"], ctx.size["n"]),)


def reference(x):
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    return out


def speed_of_light(size, world_size):
    chunk_bytes = size["m"] * size["n"] * 4
    return {"link_bytes_per_rank": (world_size - 1) * chunk_bytes, "flops": 0}
