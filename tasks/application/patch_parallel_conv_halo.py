"""Patch-parallel 2-D convolution with a halo exchange: the spatial parallelism that DistriFusion and
xDiT's patch parallelism use to split one high-resolution image across GPUs (here the synchronous
variant, which exchanges fresh boundary rows instead of reusing stale ones).

The image (B, C_in, H, W) is cut into ws horizontal bands of H/ws rows; rank r holds rows
[r*H/ws, (r+1)*H/ws). A KxK convolution (stride 1, zero padding K//2) needs K//2 rows above and below
each band: every rank sends its first K//2 rows to rank r-1 and its last K//2 rows to rank r+1 and
receives the matching halos (batch_isend_irecv); the first and last bands use zero padding at the image
edge instead. Each rank then convolves its band plus halos (no vertical padding) and returns its band of
the output, (B, C_out, H/ws, W) bf16: exactly the rows of the full convolution's output it owns.

Inputs per rank: x (B, C_in, H/ws, W) bf16; weight (C_out, C_in, K, K) and bias (C_out,) bf16,
identical on all ranks.
Tolerance: bf16 defaults (the convolution runs in bf16 with fp32 accumulation, and the summation order
is the implementation's choice).
"""
import torch
import torch.nn.functional as F

from tasks.api import Output, WorldSizes
from tasks.application._appB_halo import exchange_row_halos

SLUG = "patch_parallel_conv_halo"
ID = 120
TITLE = "Patch-parallel Conv2d: row bands with a neighbour halo exchange"
CATEGORY = "application"
ORIGIN = "DistriFusion / xDiT patch parallelism (DistriConv2d), synchronous halo exchange"
WORLD_SIZES = WorldSizes(min=2)
# full: a 1024x1024 feature map with 256 channels (an SDXL-scale UNet/VAE stage), 3x3 kernel
SIZES = {"screen": {"batch": 1, "c_in": 8, "c_out": 8, "height_per_rank": 8, "width": 16, "kernel": 3},
         "full": {"batch": 1, "c_in": 256, "c_out": 256, "height_per_rank": 128, "width": 1024, "kernel": 3}}
OUTPUTS = [Output("out", torch.bfloat16,
                  shape=lambda s, ws, r: (s["batch"], s["c_out"], s["height_per_rank"], s["width"]))]


def make_inputs(ctx):
    s = ctx.size
    k = s["kernel"]
    x = ctx.randn(s["batch"], s["c_in"], s["height_per_rank"], s["width"], dtype=torch.bfloat16)
    weight = ctx.randn(s["c_out"], s["c_in"], k, k, dtype=torch.bfloat16, scale=(s["c_in"] * k * k) ** -0.5,
                       shared=True)
    bias = ctx.randn(s["c_out"], dtype=torch.bfloat16, scale=0.1, shared=True)
    return x, weight, bias


def reference(x, weight, bias):
    halo = weight.shape[-1] // 2
    return F.conv2d(exchange_row_halos(x, halo), weight, bias, padding=(0, halo))


def speed_of_light(size, world_size):
    b, ci, co, h, w, k = (size[n] for n in ("batch", "c_in", "c_out", "height_per_rank", "width", "kernel"))
    return {"link_bytes_per_rank": 2 * (k // 2) * b * ci * w * 2, "flops": 2 * b * co * ci * k * k * h * w}
