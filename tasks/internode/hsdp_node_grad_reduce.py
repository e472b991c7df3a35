"""HSDP gradient reduction across nodes, as FSDP2 does it for a layer's gradients with a bf16 parameter
dtype and an fp32 reduce dtype: pack every gradient's dim-0 shards into one fp32 buffer, reduce-scatter
it inside the node (the shard group), then all-reduce the shard across the node replicas.

Layout (node-major): rank r is on node r // G at local rank r % G, G = size["gpus_per_node"] (8 at full
size, 4 at screen size). Each node holds one full replica of the model, sharded over its G GPUs (FSDP2's
2-D DeviceMesh ("replicate", "shard") = (nodes, G)); local rank l owns rows [l*R/G, (l+1)*R/G) of every
weight with R rows. Each rank holds the bf16 gradients of one layer's weights from its own micro-batch
(`grads`, a list of (R_i, C_i) tensors, R_i a multiple of G). The steps (FSDP2 foreach_reduce):

    1. chunk-cat: row block l of every gradient, flattened and concatenated, forms slot l of a
       (G, sum_i R_i*C_i/G) fp32 buffer (the upcast is exact);
    2. reduce-scatter with ReduceOp.AVG in the node: local rank l gets slot l averaged over the node;
    3. all-reduce with ReduceOp.AVG across nodes, among the ranks with local rank l.

Output: this rank's fp32 gradient shard, the average over all world_size ranks of its row block of each
weight, concatenated in weight order (sum_i R_i*C_i/G values). Process groups are built in make_inputs.
Tolerance: fp32 defaults (rtol 1e-4, atol 1e-5): the values are means of unit-scale bf16 numbers and
any summation order stays within a few fp32 ulps, while a bf16-rounded result fails.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.internode._nodes import gpus_per_node, node_groups

SLUG = "hsdp_node_grad_reduce"
ID = 147
TITLE = "HSDP across nodes: fp32 chunk-cat of bf16 grads, reduce-scatter in node, all-reduce across replicas"
CATEGORY = "internode"
ORIGIN = "PyTorch FSDP2 HSDP foreach_reduce (chunk_cat, reduce-scatter over 'shard', all-reduce over 'replicate')"
WORLD_SIZES = WorldSizes(min=16, multiple_of=8)
# full: one Llama-3-8B decoder layer (qkv, o, gate+up, down projections), 218 Mi bf16 gradient values
SIZES = {"screen": {"shapes": [[24, 16], [16, 16], [32, 12], [8, 20]], "gpus_per_node": 4},
         "full": {"shapes": [[6144, 4096], [4096, 4096], [28672, 4096], [4096, 14336]], "gpus_per_node": 8}}


def _shard_numel(size):
    return sum(r * c for r, c in size["shapes"]) // size["gpus_per_node"]


OUTPUTS = [Output("grad_shard", torch.float32, shape=lambda s, ws, r: (_shard_numel(s),))]


def make_inputs(ctx):
    intra, inter = node_groups(ctx)
    grads = [ctx.randn(r, c, dtype=torch.bfloat16) for r, c in ctx.size["shapes"]]
    return grads, intra, inter


def reference(grads, intra_group, inter_group):
    g = dist.get_world_size(intra_group)
    packed = torch.cat([gr.reshape(g, -1) for gr in grads], dim=1).float()   # (G, shard numel)
    shard = packed.new_empty(packed.shape[1])
    dist.reduce_scatter_tensor(shard, packed.reshape(-1), op=dist.ReduceOp.AVG, group=intra_group)
    dist.all_reduce(shard, op=dist.ReduceOp.AVG, group=inter_group)
    return shard


def speed_of_light(size, world_size):
    g = gpus_per_node(size, world_size)
    nodes, shard = world_size // g, _shard_numel(size) * 4
    network = 2 * (nodes - 1) / nodes * shard
    nvlink = (g - 1) * shard                                  # fp32 reduce-scatter of G shards
    return {"link_bytes_per_rank": nvlink + network, "network_bytes_per_rank": network,
            "flops": (g - 1) * _shard_numel(size) * (1 + 1 / g)}  # the reductions' adds
