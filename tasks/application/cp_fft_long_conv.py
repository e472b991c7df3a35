"""Context-parallel long convolution through the FFT: Hyena's fftconv (global, sequence-length implicit
filter, as in Hyena / StripedHyena / Evo's Hyena-LI layers) when the sequence is split across ranks.

The sequence of length L = ws * chunk is split in order: rank r holds positions [r*chunk, (r+1)*chunk)
of u (B, D, chunk) fp32. The filter k (D, L) fp32 spans the whole sequence (identical on every rank) and
the skip weight skip (D,) fp32 is Hyena's "u * D" term. The output is the causal convolution
  y[b, d, t] = sum_{s<=t} k[d, t - s] u[b, d, s] + skip[d] * u[b, d, t],
computed as Hyena does, by zero-padded FFT: irfft(rfft(u, 2L) * rfft(k, 2L), 2L)[:L]. Every rank gathers
the whole sequence (all-gather), convolves, and keeps its own positions. (Position t needs only the
positions before it; gathering the prefix alone, or a transpose to channel-sharded layout, is allowed.)
Inputs per rank: u (B, D, chunk) fp32; k (D, L) fp32; skip (D,) fp32.
Output per rank: y (B, D, chunk) fp32.

Tolerance: rtol 1e-4, atol 1e-4. The filters decay and have unit energy per channel, so outputs are O(1);
an FFT of length 2L in fp32 leaves errors of a few 1e-6 (growing with log2(2L)), and a direct summation
differs from it by as much; a bf16-rounded result fails.
"""
import math

import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "cp_fft_long_conv"
ID = 111
TITLE = "Context-parallel Hyena FFT long convolution (all-gather the sequence, fftconv, keep own chunk)"
CATEGORY = "application"
ORIGIN = "Hyena / StripedHyena fftconv (Hyena-LI long implicit filters) under context parallelism"
WORLD_SIZES = WorldSizes(min=2)
# full: width 512, a 256K-token sequence (32K per rank on 8 GPUs)
SIZES = {"screen": {"batch": 2, "width": 4, "chunk": 16},
         "full": {"batch": 1, "width": 512, "chunk": 32768}}
OUTPUTS = [Output("y", torch.float32, rtol=1e-4, atol=1e-4,
                  shape=lambda s, ws, r: (s["batch"], s["width"], s["chunk"]))]


def make_inputs(ctx):
    s = ctx.size
    b, d, length = s["batch"], s["width"], s["chunk"] * ctx.world_size
    u = ctx.randn(b, d, s["chunk"])
    # implicit-filter-like: noise under a per-channel exponential decay, scaled to unit energy
    rate = ctx.rand(d, 1, shared=True) * 8 + 1
    decay = torch.exp(-rate * torch.arange(length, device=ctx.device) / length)
    k = ctx.randn(d, length, shared=True) * decay
    k = k / k.norm(dim=-1, keepdim=True)
    return u, k, ctx.randn(d, shared=True)


def reference(u, k, skip):
    world, rank = dist.get_world_size(), dist.get_rank()
    b, d, chunk = u.shape
    length = chunk * world
    gathered = u.new_empty(world * b, d, chunk)
    dist.all_gather_into_tensor(gathered, u.contiguous())
    seq = gathered.view(world, b, d, chunk).permute(1, 2, 0, 3).reshape(b, d, length)
    n = 2 * length
    y = torch.fft.irfft(torch.fft.rfft(seq, n=n) * torch.fft.rfft(k, n=n), n=n)[..., :length]
    mine = slice(rank * chunk, (rank + 1) * chunk)
    return y[..., mine] + skip[:, None] * u


def speed_of_light(size, world_size):
    b, d, c = size["batch"], size["width"], size["chunk"]
    n = 2 * c * world_size
    return {"link_bytes_per_rank": (world_size - 1) * b * d * c * 4,
            "flops": 3 * 2.5 * b * d * n * math.log2(n)}
