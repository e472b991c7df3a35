"""Reduce-scatter (sum), out of place: each rank gets its own block of the elementwise sum over ranks.

This is the gradient reduce-scatter of fully sharded data parallelism (PyTorch FSDP, DeepSpeed ZeRO-2/3)
and of Megatron-LM sequence parallelism: every rank holds a full-size tensor of shape (world_size*m, n)
and receives block `rank` (rows rank*m .. rank*m+m-1) of the sum of all ranks' tensors.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "reduce_scatter"
ID = 3
TITLE = "Reduce-scatter (sum), out of place"
CATEGORY = "collective"
ORIGIN = "NCCL ncclReduceScatter / torch.distributed.reduce_scatter_tensor (FSDP / ZeRO gradient reduce-scatter)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {"screen": {"m": 16, "n": 64},
         "full": {"m": 2048, "n": 4096}}  # full: 32 MiB fp32 output block, 256 MiB input at 8 ranks
OUTPUTS = [Output("out", torch.float32, shape=lambda size, world_size, rank: (size["m"], size["n"]))]


def make_inputs(ctx):
    return (ctx.randn(ctx.world_size * ctx.size["m"], ctx.size["n"]),)


def reference(x):
    out = x.new_empty((x.shape[0] // dist.get_world_size(), *x.shape[1:]))
    dist.reduce_scatter_tensor(out, x)
    return out


def speed_of_light(size, world_size):
    block_bytes = size["m"] * size["n"] * 4
    return {"link_bytes_per_rank": (world_size - 1) * block_bytes, "flops": 0}
