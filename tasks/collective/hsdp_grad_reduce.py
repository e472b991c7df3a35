"""Hybrid-sharded (HSDP) gradient reduction on a 2-D mesh: reduce-scatter inside a shard group, then
all-reduce across replicas.

The world is a 2 x (world_size/2) mesh, as PyTorch FSDP2 builds it for HSDP (`fully_shard` on a
DeviceMesh with dims ("replicate", "shard")): shard groups are the contiguous halves of the ranks (one
"node" each), replicate groups pair rank i with rank i + world_size/2. Each rank holds a flat gradient of
shard_size * m elements; it returns its shard (chunk `rank % shard_size`, m elements) of the average of the
gradients of all world_size ranks. The reference is what FSDP2's foreach_reduce does for fp32: a
reduce-scatter with ReduceOp.AVG in the shard group, then an all-reduce with ReduceOp.AVG in the
replicate group. Both process groups are built in make_inputs and passed in.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "hsdp_grad_reduce"
ID = 14
TITLE = "HSDP gradient reduction: reduce-scatter in shard group + all-reduce across replicas"
CATEGORY = "collective"
ORIGIN = "PyTorch FSDP2 HSDP foreach_reduce (reduce-scatter over 'shard', all-reduce over 'replicate')"
WORLD_SIZES = WorldSizes(min=4, multiple_of=2)
SIZES = {"screen": {"m": 1024},
         "full": {"m": 16 * 2**20}}  # full: 64 MiB fp32 shard, 256 MiB flat gradient at 8 ranks
OUTPUTS = [Output("out", torch.float32, shape=lambda size, world_size, rank: (size["m"],))]


def make_inputs(ctx):
    s = ctx.world_size // 2
    shard_groups = [dist.new_group(list(range(k * s, (k + 1) * s))) for k in range(2)]
    replicate_groups = [dist.new_group([i, i + s]) for i in range(s)]
    x = ctx.randn(s * ctx.size["m"])
    return x, shard_groups[ctx.rank // s], replicate_groups[ctx.rank % s]


def reference(x, shard_group, replicate_group):
    out = x.new_empty(x.numel() // dist.get_world_size(shard_group))
    dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.AVG, group=shard_group)
    dist.all_reduce(out, op=dist.ReduceOp.AVG, group=replicate_group)
    return out


def speed_of_light(size, world_size):
    s = world_size // 2
    # reduce-scatter (s-1)/s of the flat gradient, then a 2-rank all-reduce of the m-element shard
    return {"link_bytes_per_rank": (s - 1) * size["m"] * 4 + size["m"] * 4, "flops": 0}
