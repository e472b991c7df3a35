"""Sequence-parallel causal long convolution with a halo from the previous rank: the context-parallel
Hyena-MR (medium-range, explicit filter) convolution of StripedHyena 2 / Evo 2 in NVIDIA's Savanna.

The sequence of length L = ws * chunk is split in order: rank r holds positions [r*chunk, (r+1)*chunk)
of x (B, D, chunk) bf16. The convolution is depthwise and causal, with a filter h (D, K) bf16 shared by
all ranks: y[b, d, t] = sum_{k<K} h[d, k] * x[b, d, t - k] (zero before the sequence start). Position t
needs the K-1 positions before it, so every rank sends its last K-1 positions to rank r+1 and receives
the previous rank's (batch_isend_irecv); rank 0 uses zeros. Then each rank convolves its chunk with the
halo in front (conv1d with the flipped filter, groups=D).
Inputs per rank: x (B, D, chunk) bf16; h (D, K) bf16. K - 1 <= chunk.
Output per rank: y (B, D, chunk) bf16.

Tolerance: bf16 defaults: the products run in bf16 with fp32 accumulation and the output is rounded to
bf16 (the filter is scaled so that outputs are O(1)).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "hyena_conv_halo"
ID = 110
TITLE = "Context-parallel Hyena causal long convolution with a halo from the previous rank (P2P)"
CATEGORY = "application"
ORIGIN = "Evo 2 / StripedHyena 2 (NVIDIA Savanna) context-parallel Hyena-MR convolution"
WORLD_SIZES = WorldSizes(min=2)
# full: width 4096, a 128K-token sequence (16K per rank on 8 GPUs), filter length 128 (Hyena-MR)
SIZES = {"screen": {"batch": 2, "width": 8, "chunk": 16, "kernel": 7},
         "full": {"batch": 1, "width": 4096, "chunk": 16384, "kernel": 128}}
OUTPUTS = [Output("y", torch.bfloat16, shape=lambda s, ws, r: (s["batch"], s["width"], s["chunk"]))]


def make_inputs(ctx):
    s = ctx.size
    x = ctx.randn(s["batch"], s["width"], s["chunk"], dtype=torch.bfloat16)
    h = ctx.randn(s["width"], s["kernel"], dtype=torch.bfloat16, scale=s["kernel"] ** -0.5, shared=True)
    return x, h


def reference(x, h):
    world, rank = dist.get_world_size(), dist.get_rank()
    halo = h.shape[1] - 1
    ops = []
    if rank + 1 < world:
        ops.append(dist.P2POp(dist.isend, x[..., -halo:].contiguous(), rank + 1))
    if rank > 0:
        previous = torch.empty_like(x[..., :halo])
        ops.append(dist.P2POp(dist.irecv, previous, rank - 1))
    else:
        previous = torch.zeros_like(x[..., :halo])
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    padded = torch.cat([previous, x], dim=-1)
    return F.conv1d(padded, h.flip(-1).unsqueeze(1), groups=h.shape[0])


def speed_of_light(size, world_size):
    b, d, c, k = size["batch"], size["width"], size["chunk"], size["kernel"]
    return {"link_bytes_per_rank": b * d * (k - 1) * 2, "flops": 2 * b * d * c * k}
