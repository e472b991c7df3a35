"""Distributed 2-D real FFT of a row-slab field with an all-to-all transpose: the spectral layer of
PhysicsNeMo's distributed AFNO / FourCastNet (DistributedRFFT2), run per channel.

The field (B, C, H, W) fp32 is split by rows: rank r holds rows [r*H/ws, (r+1)*H/ws). The transform is
torch.fft.rfft2 with norm="ortho" over the last two dims:
  1. rfft along W, locally (each rank holds whole rows);
  2. transpose: the half spectrum's W//2+1 frequency columns are cut into ws blocks (torch.tensor_split's
     rule, so the first blocks are one column wider when ws does not divide W//2+1); every rank sends
     block j of its rows to rank j (all-to-all), so rank r ends with every row of its column block;
  3. fft along H, locally.
Output per rank: its column block of the full spectrum, (B, C, H, cols_r, 2) fp32 (real and imaginary
parts, torch.view_as_real).

Tolerance: rtol 1e-4, atol 1e-4. With norm="ortho" the coefficients of a unit-variance field are O(1),
and fp32 FFT rounding grows with log2(H*W) (about 20 here), so an implementation with another transform
order, radix or library differs by a few 1e-6; a bf16-rounded result (error up to 2^-9 relative) fails.
"""
import math

import torch

from tasks.api import Output, WorldSizes
from tasks.application._appA_fft import column_counts, rows_to_columns

SLUG = "distributed_rfft2_slab"
ID = 100
TITLE = "Distributed rfft2: row slabs, local rfft, all-to-all transpose, fft along rows"
CATEGORY = "application"
ORIGIN = "NVIDIA PhysicsNeMo distributed AFNO (DistributedRFFT2) / FourCastNet spectral mixing"
WORLD_SIZES = WorldSizes(min=2)
# full: a 64-channel 1024 x 2048 field (quarter-degree-class global grid), 128 rows per rank on 8 GPUs
SIZES = {"screen": {"batch": 2, "channels": 3, "rows_per_rank": 8, "width": 16},
         "full": {"batch": 1, "channels": 64, "rows_per_rank": 128, "width": 2048}}
OUTPUTS = [Output("spectrum", torch.float32, rtol=1e-4, atol=1e-4, shape=lambda s, ws, r: (
    s["batch"], s["channels"], s["rows_per_rank"] * ws, column_counts(s["width"] // 2 + 1, ws)[r], 2))]


def make_inputs(ctx):
    s = ctx.size
    return (ctx.randn(s["batch"], s["channels"], s["rows_per_rank"], s["width"]),)


def reference(x):
    rows = torch.fft.rfft(x, dim=-1, norm="ortho")
    cols = rows_to_columns(rows)
    return torch.view_as_real(torch.fft.fft(cols, dim=-2, norm="ortho")).contiguous()


def speed_of_light(size, world_size):
    b, c, h, w = size["batch"], size["channels"], size["rows_per_rank"], size["width"]
    spectrum_bytes = b * c * h * (w // 2 + 1) * 8  # this rank's row slab of the half spectrum, complex64
    n = h * world_size * w
    return {"link_bytes_per_rank": spectrum_bytes * (world_size - 1) / world_size,
            "flops": 2.5 * b * c * n * math.log2(n) / world_size}
