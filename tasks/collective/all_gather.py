"""All-gather, out of place: every rank ends up with every rank's tensor, stacked in rank order.

This is the parameter all-gather of fully sharded data parallelism (PyTorch FSDP, DeepSpeed ZeRO-3): each
rank holds one shard and, before a layer runs, gathers the full weight. Row r of the output is rank r's
input. The collective only moves data, so the comparison is exact.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "all_gather"
ID = 2
TITLE = "All-gather into a stacked tensor, out of place"
CATEGORY = "collective"
ORIGIN = "NCCL ncclAllGather / torch.distributed.all_gather_into_tensor (FSDP / ZeRO-3 parameter all-gather)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {"screen": {"m": 16, "n": 64},
         "full": {"m": 4096, "n": 2048}}  # full: 32 MiB of fp32 per rank, 256 MiB gathered at 8 ranks
OUTPUTS = [Output("out", torch.float32, rtol=0.0, atol=0.0,  # data movement only: bit-exact
                  shape=lambda size, world_size, rank: (world_size, size["m"], size["n"]))]


def make_inputs(ctx):
    return (ctx.randn(ctx.size["m"], ctx.size["n"]),)


def reference(x):
    out = x.new_empty((dist.get_world_size(), *x.shape))
    dist.all_gather_into_tensor(out, x)
    return out


def speed_of_light(size, world_size):
    nbytes = size["m"] * size["n"] * 4
    return {"link_bytes_per_rank": (world_size - 1) * nbytes, "flops": 0}
