"""DiLoCo outer step across nodes: each node is an island that trained its own copy of the model for H
inner steps; the islands then average their pseudo-gradients over the network and apply one Nesterov
SGD step to the shared outer parameters (DiLoCo, Douillard et al. 2023; OpenDiLoCo; Streaming DiLoCo).

Layout (node-major): rank r is on node r // G at local rank r % G, G = size["gpus_per_node"] (8 at full
size, 4 at screen size). Inside a node the model is FSDP-sharded: local rank l holds shard l of every
parameter. Across nodes, the ranks with the same local rank hold the same shard, so the outer step's
all-reduce runs along each NIC rail (built in make_inputs) and never touches NVLink.

Inputs per rank, fp32, (numel,): outer_params and momentum, the shared outer state of shard l (the same
on every node); local_params, this island's shard l after its inner steps (different on every node).
The step, with outer learning rate 0.7 and Nesterov momentum 0.9 (DiLoCo's values):

    delta    = all_reduce_avg over nodes (outer_params - local_params)     # the outer gradient
    momentum = 0.9 * momentum + delta
    params   = outer_params - 0.7 * (delta + 0.9 * momentum)               # torch.optim.SGD, nesterov

Outputs: params and momentum (numel,) fp32, identical on every node (the next inner phase starts from
params). Tolerance: fp32 with atol 1e-7: parameters are O(0.02) and pseudo-gradients O(0.01), where a
different reduction order changes a few fp32 ulps (~1e-9) and rounding to bf16 (~4e-5) fails.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.internode._nodes import gpus_per_node, node_groups, rail_context

SLUG = "diloco_outer_step"
ID = 151
TITLE = "DiLoCo outer step: pseudo-gradient all-reduce across node islands + Nesterov outer update"
CATEGORY = "internode"
ORIGIN = "DiLoCo (Douillard et al. 2023) / OpenDiLoCo / Streaming DiLoCo outer optimizer across clusters"
WORLD_SIZES = WorldSizes(min=16, multiple_of=8)
OUTER_LR, MOMENTUM = 0.7, 0.9
# full: a 1B-parameter model FSDP-sharded over 8 GPUs per node: 128 Mi fp32 values per rank
SIZES = {"screen": {"numel": 2048, "gpus_per_node": 4},
         "full": {"numel": 128 * 2**20, "gpus_per_node": 8}}
OUTPUTS = [Output("params", torch.float32, atol=1e-7, shape=lambda s, ws, r: (s["numel"],)),
           Output("momentum", torch.float32, atol=1e-7, shape=lambda s, ws, r: (s["numel"],))]


def make_inputs(ctx):
    _, inter = node_groups(ctx)
    shared = rail_context(ctx)
    n = ctx.size["numel"]
    outer = shared.randn(n, scale=0.02)
    momentum = shared.randn(n, scale=0.01)
    local = outer + ctx.randn(n, scale=0.01)                 # this island's drift over its inner steps
    return outer, local, momentum, inter


def reference(outer_params, local_params, momentum, inter_group):
    delta = outer_params - local_params
    dist.all_reduce(delta, op=dist.ReduceOp.AVG, group=inter_group)
    new_momentum = MOMENTUM * momentum + delta
    return outer_params - OUTER_LR * (delta + MOMENTUM * new_momentum), new_momentum


def speed_of_light(size, world_size):
    g = gpus_per_node(size, world_size)
    nodes = world_size // g
    network = 2 * (nodes - 1) / nodes * size["numel"] * 4
    return {"link_bytes_per_rank": network, "network_bytes_per_rank": network, "flops": 7 * size["numel"]}
