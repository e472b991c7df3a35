"""FSDP2 parameter all-gather with mixed precision: copy-in of every parameter's fp32 shard, cast to
bf16, into one flat buffer, one all-gather, and the copy-out that reassembles each full bf16 parameter
from the ranks' pieces (PyTorch FSDP2 foreach_all_gather / foreach_all_gather_copy_out with
MixedPrecisionPolicy(param_dtype=bfloat16)).

FSDP2 shards every parameter on dim 0 (Shard(0)): rank r owns rows [r*R/ws, (r+1)*R/ws) of each
parameter of the unit, in fp32 (here a transformer block: QKV, output projection, MLP up and down
projections, two norm weights). Before the unit runs forward, each rank casts its shards to bf16 and
packs them one after another; the all-gather lays the ranks' packed buffers out rank after rank, so
each parameter's rows are spread over ws pieces, which the copy-out concatenates along dim 0:

    packed = cat(bf16(shard_p).flatten() for p in params)          (per-rank elements,)
    out    = all_gather(packed)                                    (ws, per-rank elements)
    full_p = cat over ranks of out[rank, offset_p : offset_p + shard_p.numel()], reshaped (R_p, ...)

Inputs per rank: the six fp32 shards, (rows/ws, ...) each (D = hidden, F = MLP width: qkv (3D, D),
proj (D, D), fc1 (F, D), fc2 (D, F), norm1 (D), norm2 (D)). Outputs: the six full bf16 parameters,
identical on every rank. Only data moves after one rounding to bf16, so the bf16 default tolerance is
never used up; a solution that gathers the wrong layout fails.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.fused._fsdp_block import parameter_shapes, shard_shape

SLUG = "fsdp_param_allgather_copy_out"
ID = 85
TITLE = "FSDP2 parameter all-gather: fp32 shards cast to bf16 and packed, one all-gather, per-parameter copy-out"
CATEGORY = "fused"
ORIGIN = "PyTorch FSDP2 foreach_all_gather + foreach_all_gather_copy_out (MixedPrecisionPolicy param_dtype=bf16)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=32)  # ws divides every parameter's rows (32 at screen size)
# full: one Llama-3-8B block (hidden 4096, MLP 14336 as fc1 = gate and up fused: 2 * 14336 rows)
SIZES = {"screen": {"hidden": 32, "ffn": 64}, "full": {"hidden": 4096, "ffn": 28672}}
OUTPUTS = [Output(name, torch.bfloat16, shape=lambda s, n, r, k=k: parameter_shapes(s)[k][1])
           for k, (name, _) in enumerate(parameter_shapes({"hidden": 1, "ffn": 1}))]


def make_inputs(ctx):
    return tuple(ctx.randn(*shard_shape(ctx.size, ctx.world_size, k), scale=0.02)
                 for k in range(len(parameter_shapes(ctx.size))))


def reference(qkv, proj, fc1, fc2, norm1, norm2):
    world = dist.get_world_size()
    shards = (qkv, proj, fc1, fc2, norm1, norm2)
    packed = torch.cat([s.to(torch.bfloat16).reshape(-1) for s in shards])
    out = packed.new_empty(world, packed.numel())
    dist.all_gather_into_tensor(out, packed)
    pieces = out.split([s.numel() for s in shards], dim=1)                   # (ws, shard elements) each
    return tuple(p.reshape(world * s.shape[0], *s.shape[1:]) for p, s in zip(pieces, shards))


def speed_of_light(size, world_size):
    n = sum(torch.Size(shape).numel() for _, shape in parameter_shapes(size))
    return {"link_bytes_per_rank": (world_size - 1) / world_size * n * 2, "flops": 0}
