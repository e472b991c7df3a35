"""Hierarchical broadcast of updated weights from the trainer node to inference nodes (RL weight sync:
the policy trained on node 0 is pushed to the rollout engines on every other node after each step).

Layout (node-major): rank r is on node r // G at local rank r % G, G = size["gpus_per_node"] (8 at full
size, 4 at screen size). Every rank holds one shard of a flat bf16 weight buffer (G shards of n values,
shard l on local rank l): on node 0 it is the trainer's freshly updated shard, on the other nodes the
stale shard of the previous version, which the sync overwrites. Output on every rank: the full updated
buffer (G * n values), node 0's shards in local-rank order. The stages:

    1. inter-node broadcast along each NIC rail: rank (0, l) broadcasts its shard to ranks (k, l), so
       all G NICs of node 0 carry 1/G of the weights in parallel;
    2. intra-node all-gather of the G shards over NVLink.

A flat broadcast of the whole buffer from rank 0 gives the same result with one NIC doing all the work.
The process groups are built in make_inputs. The output is a copy of bf16 values (bit-exact for any
correct candidate; the bf16 default tolerance is what the validator requires of bf16 outputs); a rank
that keeps its stale shard fails.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.internode._nodes import gpus_per_node, node_groups

SLUG = "weight_broadcast_from_node0"
ID = 149
TITLE = "RL weight sync: hierarchical broadcast of node 0's weight shards (rail broadcast + intra-node gather)"
CATEGORY = "internode"
ORIGIN = "RL post-training weight sync from trainer to rollout engines (OpenRLHF / veRL / NeMo-RL NCCL broadcast)"
WORLD_SIZES = WorldSizes(min=16, multiple_of=8)
# full: an 8B-parameter bf16 policy is 16 GiB; one 1 Gi-parameter slice of it, 128 Mi values per GPU
SIZES = {"screen": {"n": 2048, "gpus_per_node": 4},
         "full": {"n": 128 * 2**20, "gpus_per_node": 8}}
OUTPUTS = [Output("weights", torch.bfloat16, shape=lambda s, ws, r: (s["gpus_per_node"] * s["n"],))]


def make_inputs(ctx):
    intra, inter = node_groups(ctx)
    return ctx.randn(ctx.size["n"], dtype=torch.bfloat16, scale=0.02), intra, inter


def reference(shard, intra_group, inter_group):
    fresh = shard.clone()
    dist.broadcast(fresh, group_src=0, group=inter_group)
    out = shard.new_empty(dist.get_world_size(intra_group) * shard.numel())
    dist.all_gather_into_tensor(out, fresh, group=intra_group)
    return out


def speed_of_light(size, world_size):
    g = gpus_per_node(size, world_size)
    shard = size["n"] * 2
    network = shard                                          # each rank receives its rail's shard once
    nvlink = (g - 1) * shard
    return {"link_bytes_per_rank": nvlink + network, "network_bytes_per_rank": network, "flops": 0}
