"""All-reduce (sum) of bf16 gradients accumulated and returned in fp32.

Mixed-precision training computes gradients in bf16 but reduces them in fp32 so that summing many ranks'
contributions does not round at every step: PyTorch FSDP2's MixedPrecisionPolicy(reduce_dtype=float32),
DDP/replicate with an fp32 reduce dtype, Megatron-LM's grad_reduce_in_fp32. The input is this rank's bf16
tensor; the output is the fp32 sum over ranks of the inputs converted to fp32. The reference upcasts and
all-reduces in fp32; a solution may move bf16 over the links as long as it accumulates in fp32 (the
comparison uses fp32's tolerance, so summing in bf16 fails).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "all_reduce_bf16_fp32acc"
ID = 13
TITLE = "All-reduce of bf16 gradients with fp32 accumulation and fp32 result"
CATEGORY = "collective"
ORIGIN = "PyTorch FSDP2 MixedPrecisionPolicy(reduce_dtype=float32) / Megatron-LM grad_reduce_in_fp32"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {"screen": {"n": 4096}, "full": {"n": 64 * 2**20}}  # full: 128 MiB of bf16 in, 256 MiB of fp32 out
OUTPUTS = [Output("out", torch.float32, shape=lambda size, world_size, rank: (size["n"],))]


def make_inputs(ctx):
    return (ctx.randn(ctx.size["n"], dtype=torch.bfloat16),)


def reference(x):
    out = x.float()
    dist.all_reduce(out)
    return out


def speed_of_light(size, world_size):
    # reduce-scatter the bf16 inputs straight to each chunk's owner (summing in fp32 there), then
    # all-gather the fp32 chunks: (ws-1)/ws of the tensor at 2 bytes, then at 4 bytes
    return {"link_bytes_per_rank": (world_size - 1) / world_size * size["n"] * (2 + 4), "flops": 0}
