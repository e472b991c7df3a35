"""FSDP2 gradient reduce-scatter of bf16 gradients with fp32 reduction: the copy-in of several
parameters' gradients into one flat buffer laid out by destination rank, an upcast, a reduce-scatter
(average) in fp32 and the copy-out into each parameter's fp32 gradient shard (PyTorch FSDP2
foreach_reduce with MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)).

FSDP2 shards every parameter on dim 0 (Shard(0)): rank r owns rows [r*R/ws, (r+1)*R/ws) of each
parameter. After the backward of one FSDP unit (here a transformer block: QKV, output projection, MLP
up and down projections, two norm weights) each rank holds the unit's full bf16 gradients, computed on
its own micro-batch. FSDP2 reduces all of them with one collective: each gradient is cut into ws row
chunks and the chunks are concatenated so that every rank's portion is contiguous, the buffer is cast to
fp32 and reduce-scattered with an average, and each rank splits its portion back into per-parameter
shards. Reducing in fp32 is the point: a bf16 reduction rounds after every addition.

Inputs per rank: the six bf16 gradients of the block, this rank's (D = hidden, F = MLP width):
qkv (3D, D), proj (D, D), fc1 (F, D), fc2 (D, F), norm1 (D), norm2 (D). Outputs: the six fp32 gradient
shards, each (rows/ws, ...) = the average over ranks of the rank's rows. Tolerance: fp32 defaults, so a
reduction carried out in bf16 fails.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.fused._fsdp_block import parameter_shapes, shard_shape

SLUG = "fsdp_bf16_grad_reduce_scatter_fp32"
ID = 72
TITLE = "FSDP2 gradient reduce-scatter: bf16 grads packed by rank, reduced in fp32 (average), per-parameter shards"
CATEGORY = "fused"
ORIGIN = "PyTorch FSDP2 foreach_reduce (chunk_cat copy-in, reduce_dtype=float32 reduce-scatter, Shard(0) copy-out)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=32)  # ws divides every parameter's rows (32 at screen size)
# full: one Llama-3-8B block (hidden 4096, MLP 14336 as fc1 = gate and up fused: 2 * 14336 rows)
SIZES = {"screen": {"hidden": 32, "ffn": 64}, "full": {"hidden": 4096, "ffn": 28672}}
OUTPUTS = [Output(name, torch.float32, shape=lambda s, n, r, k=k: shard_shape(s, n, k))
           for k, (name, _) in enumerate(parameter_shapes({"hidden": 1, "ffn": 1}))]


def make_inputs(ctx):
    return tuple(ctx.randn(*shape, dtype=torch.bfloat16) for _, shape in parameter_shapes(ctx.size))


def reference(qkv, proj, fc1, fc2, norm1, norm2):
    world = dist.get_world_size()
    grads = (qkv, proj, fc1, fc2, norm1, norm2)
    flat = torch.cat([g.float().reshape(world, -1) for g in grads], dim=1)   # (ws, per-rank elements)
    shard = flat.new_empty(flat.shape[1])
    dist.reduce_scatter_tensor(shard, flat.reshape(-1), op=dist.ReduceOp.AVG)
    pieces = shard.split([g.numel() // world for g in grads])
    return tuple(p.view(g.shape[0] // world, *g.shape[1:]) for p, g in zip(pieces, grads))


def speed_of_light(size, world_size):
    n = sum(torch.Size(shape).numel() for _, shape in parameter_shapes(size))
    # a direct exchange sends bf16 chunks to their owner, which accumulates them in fp32
    return {"link_bytes_per_rank": (world_size - 1) / world_size * n * 2, "flops": n}
