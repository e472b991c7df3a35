"""The node-major layout every inter-node task shares, and its process groups.

Rank r sits on node r // G at local rank (GPU index) r % G, where G = size["gpus_per_node"]: 8 at full
size (HGX H100/H200 nodes), fewer at screen size so that a 16-rank simulated world stays quick. The
intra-node group of a rank is its node's G ranks (NVLink); its inter-node group is the ranks with the
same local rank on every node (one GPU per node, the rail its NIC sits on in a rail-optimised fabric).
"""
import torch.distributed as dist

from tasks.api import warm_up
from tasks.internode._replicated import replicated_context


def gpus_per_node(size: dict, world_size: int) -> int:
    """G for this preset; a world that is not at least two whole nodes is a usage error."""
    g = size["gpus_per_node"]
    if world_size % g or world_size < 2 * g:
        raise ValueError(f"world size {world_size} is not two or more nodes of {g} GPUs; "
                         f"run this task on a multiple of {g} ranks, at least {2 * g}")
    return g


def node_groups(ctx):
    """(intra-node group, inter-node group) of this rank. Every rank builds every group, in the same
    order (new_group is collective), and warms its own two so no timed call creates a communicator."""
    g = gpus_per_node(ctx.size, ctx.world_size)
    ws = ctx.world_size
    intra = [dist.new_group(list(range(n * g, (n + 1) * g))) for n in range(ws // g)]
    inter = [dist.new_group(list(range(local, ws, g))) for local in range(g)]
    mine = intra[ctx.rank // g], inter[ctx.rank % g]
    warm_up(mine, ctx.device)
    return mine


def rail_context(ctx):
    """A context whose draws are identical on every rank with this rank's local rank (one per node) and
    differ between local ranks: values replicated across nodes but sharded inside each, such as the
    data-parallel replicas of an FSDP parameter shard."""
    return replicated_context(ctx, "rail", ctx.rank % gpus_per_node(ctx.size, ctx.world_size))
