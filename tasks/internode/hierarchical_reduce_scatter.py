"""Hierarchical reduce-scatter of gradients across nodes (ZeRO-3 / FSDP full sharding over a multi-node
job): reduce-scatter inside the node over NVLink, then reduce-scatter the node's partial sums along each
NIC rail, so every rank sends only (N-1)/N of a 1/G share over the network.

Layout (node-major): rank r is on node r // G at local rank r % G, G = size["gpus_per_node"] (8 at full
size, 4 at screen size); N = world_size / G nodes. Each rank holds grad (world_size * m,) fp32, a flat
gradient bucket; rank r owns block r (m values), as with a flat reduce_scatter_tensor. The stages:

    1. reorder the blocks from (node, local) to (local, node) order, so that the intra-node share of
       local rank l is the blocks of every rank with local rank l;
    2. intra-node reduce-scatter (sum): local rank l gets those N blocks summed over its node;
    3. inter-node reduce-scatter (sum) among the ranks with local rank l: node n keeps block n*G + l.

Output: block r of the bucket summed over all ranks (m fp32 values), the same as a flat reduce-scatter.
Process groups are built in make_inputs. Tolerance: the fp32 defaults with atol 1e-5: sums of up to a
few hundred unit normals, where any summation order stays within a few fp32 ulps and a bf16-rounded
result fails.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.internode._nodes import gpus_per_node, node_groups

SLUG = "hierarchical_reduce_scatter"
ID = 150
TITLE = "Hierarchical reduce-scatter: intra-node reduce-scatter, then inter-node reduce-scatter per rail"
CATEGORY = "internode"
ORIGIN = "ZeRO-3 / FSDP gradient reduce-scatter across nodes; NCCL-style rail-aligned 2-D reduce-scatter"
WORLD_SIZES = WorldSizes(min=16, multiple_of=8)
SIZES = {"screen": {"m": 256, "gpus_per_node": 4},
         "full": {"m": 4 * 2**20, "gpus_per_node": 8}}  # full: a 256 MiB fp32 bucket at 16 ranks
OUTPUTS = [Output("grad_shard", torch.float32, atol=1e-5, shape=lambda s, ws, r: (s["m"],))]


def make_inputs(ctx):
    intra, inter = node_groups(ctx)
    return ctx.randn(ctx.world_size * ctx.size["m"]), intra, inter


def reference(grad, intra_group, inter_group):
    g, nodes = dist.get_world_size(intra_group), dist.get_world_size(inter_group)
    by_local = grad.view(nodes, g, -1).transpose(0, 1).reshape(-1)       # (local, node, m)
    node_sum = grad.new_empty(grad.numel() // g)
    dist.reduce_scatter_tensor(node_sum, by_local, group=intra_group)
    out = grad.new_empty(grad.numel() // (g * nodes))
    dist.reduce_scatter_tensor(out, node_sum, group=inter_group)
    return out


def speed_of_light(size, world_size):
    g = gpus_per_node(size, world_size)
    nodes, block = world_size // g, size["m"] * 4
    network = (nodes - 1) * block
    nvlink = (g - 1) * nodes * block
    return {"link_bytes_per_rank": nvlink + network, "network_bytes_per_rank": network, "flops": 0}
