"""Tile-parallel VAE decode: each rank decodes one overlapping tile of a diffusion latent and the tiles
are all-gathered and blended into the full image, as xDiT's DistVAE and diffusers' tiled VAE decoding
do for high-resolution Stable Diffusion / FLUX images.

Rank r holds band r of the latent, z (B, 4, h, W) (latent rows [r*h, (r+1)*h)). The decode:

  1. halo: the band is extended by `overlap` latent rows from the neighbouring bands (send/recv); beyond
     the image edge the extension is zeros;
  2. decode the extended tile (h + 2*overlap rows) with a small conv decoder, each conv zero-padded at
     the tile's own border: conv3x3(4->C), SiLU, nearest 2x upsample, conv3x3(C->C), SiLU, conv3x3(C->3)
     (bf16 weights and activations);
  3. all-gather the decoded tiles (every tile has the same shape, (B, 3, 2(h+2*overlap), 2W));
  4. blend: tile r covers pixel rows [2(r*h - overlap), 2((r+1)*h + overlap)); in the 4*overlap rows two
     neighbouring tiles share, their weights ramp linearly, w = (distance into the tile + 0.5) /
     (4*overlap), so the two weights sum to one; elsewhere one tile has weight one. The weighted sum is
     taken in fp32, rows outside the image dropped, and the result rounded to bf16.

Output: the full image (B, 3, 2*ws*h, 2W) bf16, identical on every rank.
Inputs per rank: z (B, 4, h, W) bf16; conv weights and biases bf16, identical on all ranks; overlap (int).
Tolerance: bf16 defaults (the convolutions run in bf16 with fp32 accumulation in any order).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes
from tasks.application._appB_halo import exchange_row_halos

SLUG = "tiled_vae_decode"
ID = 121
TITLE = "Tile-parallel VAE decode: latent halo, per-rank conv decoder, all-gather and linear blend"
CATEGORY = "application"
ORIGIN = "xDiT DistVAE / diffusers AutoencoderKL tiled_decode (overlapping tiles, linear blending)"
WORLD_SIZES = WorldSizes(min=2)
# full: a 256x256 latent band-split over the ranks (a 512x512 image after this decoder's 2x upsample),
# 256 channels; each tile overlaps its neighbours by 8 latent rows
SIZES = {"screen": {"batch": 1, "rows_per_rank": 8, "width": 8, "channels": 8, "overlap": 2},
         "full": {"batch": 1, "rows_per_rank": 32, "width": 256, "channels": 256, "overlap": 8}}
OUTPUTS = [Output("image", torch.bfloat16,
                  shape=lambda s, ws, r: (s["batch"], 3, 2 * ws * s["rows_per_rank"], 2 * s["width"]))]


def make_inputs(ctx):
    s = ctx.size
    c = s["channels"]
    bf = torch.bfloat16
    z = ctx.randn(s["batch"], 4, s["rows_per_rank"], s["width"], dtype=bf)
    weights = []
    for c_in, c_out in ((4, c), (c, c), (c, 3)):
        weights.append(ctx.randn(c_out, c_in, 3, 3, dtype=bf, scale=(c_in * 9) ** -0.5 * 1.5, shared=True))
        weights.append(ctx.randn(c_out, dtype=bf, scale=0.1, shared=True))
    return (z, *weights, s["overlap"])


def _decode(tile, w_in, b_in, w_mid, b_mid, w_out, b_out):
    h = F.silu(F.conv2d(tile, w_in, b_in, padding=1))
    h = F.interpolate(h, scale_factor=2, mode="nearest")
    h = F.silu(F.conv2d(h, w_mid, b_mid, padding=1))
    return F.conv2d(h, w_out, b_out, padding=1)


def _ramp(n, ramp_len, up, down, device):
    """Blend weight of each of a tile's n rows: linear ramps of ramp_len rows at the shared edges."""
    pos = torch.arange(n, device=device, dtype=torch.float32) + 0.5
    w = torch.ones(n, device=device)
    if up:
        w = w * (pos / ramp_len).clamp(max=1)
    if down:
        w = w * ((n - pos) / ramp_len).clamp(max=1)
    return w


def reference(z, w_in, b_in, w_mid, b_mid, w_out, b_out, overlap):
    world = dist.get_world_size()
    tile = _decode(exchange_row_halos(z, overlap), w_in, b_in, w_mid, b_mid, w_out, b_out)
    tiles = tile.new_empty(world, *tile.shape)
    dist.all_gather_into_tensor(tiles, tile)
    b, _, n, width = tile.shape
    band, margin = 2 * z.shape[2], 2 * overlap
    canvas = torch.zeros(b, 3, world * band + 2 * margin, width, device=z.device)  # margin rows: off-image
    for r in range(world):
        w = _ramp(n, 2 * margin, up=r > 0, down=r < world - 1, device=z.device)
        canvas[:, :, r * band:r * band + n] += tiles[r].float() * w[:, None]
    return canvas[:, :, margin:-margin].to(z.dtype)


def speed_of_light(size, world_size):
    b, h, w, c, o = (size[k] for k in ("batch", "rows_per_rank", "width", "channels", "overlap"))
    rows = h + 2 * o
    flops = 2 * 9 * b * (4 * c * rows * w + c * c * 4 * rows * w + c * 3 * 4 * rows * w)
    tile_bytes = b * 3 * 4 * rows * w * 2
    return {"link_bytes_per_rank": 2 * o * b * 4 * w * 2 + (world_size - 1) * tile_bytes, "flops": flops}
