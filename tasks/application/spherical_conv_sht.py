"""Spherical convolution through a latitude-sharded spherical harmonic transform: the spectral block of
the Spherical Fourier Neural Operator (SFNO, NVIDIA makani / torch-harmonics' distributed SHT), with
channel mixing per degree l as in its Driscoll-Healy convolution.

The field (B, C, nlat, nlon) fp32 lives on an equiangular grid (colatitude theta_i = (i + 1/2) pi/nlat)
and is split by latitude: rank r holds rows [r*nlat/ws, (r+1)*nlat/ws) with every longitude.
  1. Fourier transform along longitude, locally: c_m(theta) = rfft(f, norm="forward")[m], m < M.
  2. Legendre transform, a sum over latitude: a_lm = sum_i w_i P_lm(theta_i) c_m(theta_i), with midpoint
     quadrature weights w_i = (pi/nlat) sin(theta_i) and orthonormal associated Legendre functions P_lm
     (zero for l < m). Each rank sums its own latitudes; an all-reduce completes the sum.
  3. Convolution: a'_o,lm = sum_c weight[c, o, l] a_c,lm (an isotropic filter per degree, mixing channels).
  4. Inverse transform for this rank's latitudes, locally: c'_m(theta) = sum_l P_lm(theta) a'_lm, then
     f' = irfft(c', n=nlon, norm="forward").
Inputs per rank: x (B, C, nlat/ws, nlon) fp32; legendre (M, L, nlat/ws) fp32, P_lm at this rank's
latitudes; quad_weights (nlat/ws,) fp32; weight (C, C_out, L) fp32, identical on every rank.
Output per rank: its latitude rows of the filtered field, (B, C_out, nlat/ws, nlon) fp32.

Tolerance: rtol 1e-4, atol 1e-4 on an output of unit scale (the filter weights are scaled so): the
Legendre sums run over nlat latitudes and L degrees in an order each implementation chooses (an
all-reduce, or a transpose to mode-sharded layout as makani does), which leaves a few 1e-6 in fp32;
a bf16-rounded result fails.
"""
import math

import numpy as np
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "spherical_conv_sht"
ID = 102
TITLE = "SFNO spherical convolution: latitude-sharded SHT, all-reduce over latitude, inverse SHT"
CATEGORY = "application"
ORIGIN = "NVIDIA makani / torch-harmonics distributed SHT (Spherical Fourier Neural Operator, FourCastNet v2)"
WORLD_SIZES = WorldSizes(min=2)
# full: a 0.5-degree global grid (360 x 720), 256 channels, 360 degrees and orders
SIZES = {"screen": {"batch": 1, "channels": 4, "lat_per_rank": 4, "nlon": 16, "modes": 8},
         "full": {"batch": 1, "channels": 256, "lat_per_rank": 45, "nlon": 720, "modes": 360}}
OUTPUTS = [Output("out", torch.float32, rtol=1e-4, atol=1e-4, shape=lambda s, ws, r: (
    s["batch"], s["channels"], s["lat_per_rank"], s["nlon"]))]


def associated_legendre(modes: int, colat: np.ndarray) -> np.ndarray:
    """Orthonormal associated Legendre functions (int_{-1}^{1} P^2 dx = 1) at `colat`, (M, L, len(colat)).

    Built in numpy (fp64) by the standard recurrence in l, so that a full-size shape run, which fakes every
    torch op, does not replay it op by op.
    """
    x, s = np.cos(colat), np.sin(colat)
    m = np.arange(modes, dtype=np.float64)[:, None]
    # P_mm = sqrt(1/2) prod_{k<=m} sqrt((2k+1)/(2k)) sin^m
    growth = np.cumprod(np.concatenate([[1.0], np.sqrt((2 * m[1:, 0] + 1) / (2 * m[1:, 0]))]))
    p_mm = np.sqrt(0.5) * growth[:, None] * s[None] ** m
    out = np.zeros((modes, modes, len(colat)))
    for l in range(modes):
        out[l, l] = p_mm[l]
        if l >= 1:
            mm = m[:l - 1, 0]
            a = np.sqrt((4 * l * l - 1) / (l * l - mm * mm))[:, None]
            b = np.sqrt(((l - 1) ** 2 - mm * mm) / (4 * (l - 1) ** 2 - 1))[:, None]
            prev2 = out[:l - 1, l - 2] if l >= 2 else 0.0
            out[:l - 1, l] = a * (x * out[:l - 1, l - 1] - b * prev2)
            out[l - 1, l] = np.sqrt(2 * l + 1) * x * out[l - 1, l - 1]
    return out


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    nlat, c, modes = s["lat_per_rank"] * ws, s["channels"], s["modes"]
    first = ctx.rank * s["lat_per_rank"]
    colat = (np.arange(first, first + s["lat_per_rank"]) + 0.5) * (math.pi / nlat)
    x = ctx.randn(s["batch"], c, s["lat_per_rank"], s["nlon"])
    # scaled so that the filtered field is O(1) whatever the grid and the channel count
    weight = ctx.randn(c, c, modes, shared=True, scale=(s["nlon"] / (modes * c)) ** 0.5)
    table = torch.tensor(associated_legendre(modes, colat), dtype=torch.float32, device=ctx.device)
    quad_weights = torch.tensor(np.sin(colat) * (math.pi / nlat), dtype=torch.float32, device=ctx.device)
    return x, table, quad_weights, weight


def reference(x, legendre, quad_weights, weight):
    modes = legendre.shape[0]
    coeffs = torch.fft.rfft(x, dim=-1, norm="forward")[..., :modes]  # (B, C, lat, M)
    partial = torch.einsum("bcim,mli->bclm", coeffs, (legendre * quad_weights).to(coeffs.dtype))
    spectrum = torch.view_as_real(partial).contiguous()
    dist.all_reduce(spectrum)
    filtered = torch.einsum("bclm,col->bolm", torch.view_as_complex(spectrum), weight.to(coeffs.dtype))
    synthesis = torch.einsum("bolm,mli->boim", filtered, legendre.to(coeffs.dtype))
    return torch.fft.irfft(synthesis, n=x.shape[-1], dim=-1, norm="forward")


def speed_of_light(size, world_size):
    b, c, lat, nlon, modes = (size[k] for k in ("batch", "channels", "lat_per_rank", "nlon", "modes"))
    spectrum_bytes = b * c * modes * modes * 8
    fft_flops = 2 * 2.5 * b * c * lat * nlon * math.log2(nlon)  # forward and inverse, along longitude
    legendre_flops = 2 * 4 * b * c * lat * modes * modes  # forward and inverse, complex x real
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * spectrum_bytes,
            "flops": fft_flops + legendre_flops + 4 * b * c * c * modes * modes}
