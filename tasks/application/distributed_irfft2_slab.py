"""Distributed 2-D inverse real FFT back to row slabs: the second half of the spectral layer of
PhysicsNeMo's distributed AFNO / FourCastNet (DistributedIRFFT2), the inverse of distributed_rfft2_slab.

Each rank holds a block of frequency columns of the half spectrum (B, C, H, W//2+1) with every row: rank
r holds columns as torch.tensor_split cuts W//2+1 into ws blocks, as (B, C, H, cols_r, 2) fp32 (real and
imaginary parts). The transform is torch.fft.irfft2 with norm="ortho" and output width W:
  1. inverse fft along H, locally;
  2. transpose: every rank cuts its block into ws row slabs of H/ws rows and sends slab j to rank j
     (all-to-all), so rank r ends with every frequency column of rows [r*H/ws, (r+1)*H/ws);
  3. inverse real fft along W (n=W), locally. As in torch.fft.irfft2, the imaginary parts of the zero
     and Nyquist columns do not contribute (the spectrum is random, not necessarily Hermitian).
Inputs per rank: spectrum (B, C, H, cols_r, 2) fp32; width W (int, even, the same on every rank).
Output per rank: its row slab of the field, (B, C, H/ws, W) fp32.

Tolerance: rtol 1e-4, atol 1e-4: with norm="ortho" the output of a unit-variance spectrum is O(1), and
fp32 FFT rounding (growing with log2(H*W)) leaves a few 1e-6 between transform orders or libraries; a
bf16-rounded result fails.
"""
import math

import torch

from tasks.api import Output, WorldSizes
from tasks.application._appA_fft import column_counts, columns_to_rows

SLUG = "distributed_irfft2_slab"
ID = 101
TITLE = "Distributed irfft2: ifft along rows, all-to-all transpose back to row slabs, local irfft"
CATEGORY = "application"
ORIGIN = "NVIDIA PhysicsNeMo distributed AFNO (DistributedIRFFT2) / FourCastNet spectral mixing"
WORLD_SIZES = WorldSizes(min=2)
# full: the spectrum of a 64-channel 1024 x 2048 field, 8 GPUs
SIZES = {"screen": {"batch": 2, "channels": 3, "rows_per_rank": 8, "width": 16},
         "full": {"batch": 1, "channels": 64, "rows_per_rank": 128, "width": 2048}}
OUTPUTS = [Output("field", torch.float32, rtol=1e-4, atol=1e-4, shape=lambda s, ws, r: (
    s["batch"], s["channels"], s["rows_per_rank"], s["width"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    cols = column_counts(s["width"] // 2 + 1, ws)[ctx.rank]
    return ctx.randn(s["batch"], s["channels"], s["rows_per_rank"] * ws, cols, 2), s["width"]


def reference(spectrum, width):
    cols = torch.fft.ifft(torch.view_as_complex(spectrum), dim=-2, norm="ortho")
    rows = columns_to_rows(cols, width // 2 + 1)
    return torch.fft.irfft(rows, n=width, dim=-1, norm="ortho")


def speed_of_light(size, world_size):
    b, c, h, w = size["batch"], size["channels"], size["rows_per_rank"], size["width"]
    spectrum_bytes = b * c * h * (w // 2 + 1) * 8  # one row slab of the half spectrum, complex64
    n = h * world_size * w
    return {"link_bytes_per_rank": spectrum_bytes * (world_size - 1) / world_size,
            "flops": 2.5 * b * c * n * math.log2(n) / world_size}
