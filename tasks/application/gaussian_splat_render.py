"""Distributed 3D Gaussian splatting: Gaussians sharded across ranks are projected to screen space
(EWA splatting, as in the 3DGS rasteriser's preprocess step), exchanged, and each rank alpha-composites
its band of image rows: Grendel-GS's split (Gaussians sharded, pixels partitioned, projected Gaussians
moved to the ranks whose pixels they touch), simplified to an all-gather of every projected Gaussian.

Rank r holds G Gaussians: means (G, 3), log_scales (G, 3), quaternions (G, 4) (w, x, y, z; not
normalised), opacity logits (G,) and RGB colours (G, 3). The pinhole camera (rotation (3, 3),
translation (3,), focal length W pixels, principal point at the image centre) is shared, as are the
rows per rank and the image width W (ints). Each rank:

  1. projects its Gaussians: cam = R @ mean + t; depth = cam.z; centre = f * (x, y) / z + (W/2, H/2);
     covariance Sigma = (Rq S)(Rq S)^T from the normalised quaternion and exp(log_scales); screen
     covariance = J R Sigma R^T J^T + 0.3 I with the perspective Jacobian J = [[f/z, 0, -f x/z^2],
     [0, f/z, -f y/z^2]]; conic = its inverse (a, b, c); opacity = sigmoid(logit);
  2. all-gathers the projected records (centre, conic, depth, opacity, colour) of every rank;
  3. sorts all Gaussians by depth (nearest first) and composites the pixels of its rows
     [r*H/ws, (r+1)*H/ws) at pixel centres (x+0.5, y+0.5): alpha_i = min(0.99, opacity_i *
     exp(-(a dx^2 + c dy^2)/2 - b dx dy)), colour = sum_i alpha_i c_i prod_{j<i} (1 - alpha_j), with no
     alpha cut-off and no early termination (so the result does not hinge on a threshold).

Output: image (3, H/ws, W) fp32, this rank's rows.
Tolerance: rtol 1e-3, atol 1e-4: the transmittance is a product of up to ws*G factors, whose fp32 rounding
(and the choice of cumprod versus exp of summed logs) moves results by up to ~1e-4 relative; bf16
rounding (2^-9) still fails.
"""
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "gaussian_splat_render"
ID = 127
TITLE = "Gaussian splatting: sharded projection, all-gather, per-rank row-band compositing"
CATEGORY = "application"
ORIGIN = "3D Gaussian Splatting rasteriser (Kerbl et al. 2023) with Grendel-GS-style distributed rendering"
WORLD_SIZES = WorldSizes(min=2)
# full: 2048 Gaussians per GPU (16K in all), a 256x256 image
SIZES = {"screen": {"gaussians": 32, "rows_per_rank": 4, "width": 16},
         "full": {"gaussians": 2048, "rows_per_rank": 32, "width": 256}}
OUTPUTS = [Output("image", torch.float32, rtol=1e-3, atol=1e-4,
                  shape=lambda s, ws, r: (3, s["rows_per_rank"], s["width"]))]


def _rotation(q):
    """Rotation matrices (..., 3, 3) of quaternions (..., 4) in (w, x, y, z) order."""
    w, x, y, z = F.normalize(q, dim=-1).unbind(-1)
    return torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1).unflatten(-1, (3, 3))


def make_inputs(ctx):
    s = ctx.size
    g = s["gaussians"]
    means = ctx.randn(g, 3) + ctx.randn(1, 3, scale=0.5)        # each rank's shard is a different region
    means[:, 2] = means[:, 2].clamp(-2.5, 2.5)
    log_scales = math.log(0.3) + 0.3 * ctx.randn(g, 3)
    quats = ctx.randn(g, 4)
    opacity_logits = ctx.randn(g) - 1
    colors = ctx.rand(g, 3)
    rot = _rotation(torch.tensor([1.0, 0, 0, 0], device=ctx.device) + ctx.randn(4, scale=0.1, shared=True))
    trans = torch.tensor([0.0, 0.0, 4.0], device=ctx.device) + ctx.randn(3, scale=0.1, shared=True)
    return means, log_scales, quats, opacity_logits, colors, rot, trans, s["rows_per_rank"], s["width"]


def _project(means, log_scales, quats, opacity_logits, colors, rot, trans, focal, height, width):
    """Per-Gaussian screen-space records: centre (2), conic (3), depth, opacity, colour (3)."""
    cam = means @ rot.T + trans
    x, y, z = cam.unbind(-1)
    centre = torch.stack([focal * x / z + width / 2, focal * y / z + height / 2], -1)
    m = _rotation(quats) * log_scales.exp()[:, None, :]
    jac = torch.zeros(means.shape[0], 2, 3, device=means.device)
    jac[:, 0, 0], jac[:, 0, 2] = focal / z, -focal * x / z ** 2
    jac[:, 1, 1], jac[:, 1, 2] = focal / z, -focal * y / z ** 2
    t = jac @ rot @ m
    cov = t @ t.transpose(1, 2) + 0.3 * torch.eye(2, device=means.device)
    a, b, c = cov[:, 0, 0], cov[:, 0, 1], cov[:, 1, 1]
    det = a * c - b * b
    conic = torch.stack([c / det, -b / det, a / det], -1)
    return torch.cat([centre, conic, z[:, None], torch.sigmoid(opacity_logits)[:, None], colors], -1)


def reference(means, log_scales, quats, opacity_logits, colors, rot, trans, rows_per_rank, width):
    world, rank = dist.get_world_size(), dist.get_rank()
    height = world * rows_per_rank
    rec = _project(means, log_scales, quats, opacity_logits, colors, rot, trans, float(width), height, width)
    every = rec.new_empty(world * rec.shape[0], rec.shape[1])
    dist.all_gather_into_tensor(every, rec)
    every = every[torch.argsort(every[:, 5], stable=True)]
    ys = torch.arange(rank * rows_per_rank, (rank + 1) * rows_per_rank, device=means.device) + 0.5
    xs = torch.arange(width, device=means.device) + 0.5
    px = torch.stack(torch.meshgrid(xs, ys, indexing="xy"), -1).reshape(-1, 2)    # (pixels, 2), row-major
    d = px[:, None, :] - every[None, :, :2]
    ca, cb, cc = every[:, 2], every[:, 3], every[:, 4]
    power = 0.5 * (ca * d[..., 0] ** 2 + cc * d[..., 1] ** 2) + cb * d[..., 0] * d[..., 1]
    alpha = (every[:, 6] * torch.exp(-power)).clamp(max=0.99)
    trans_before = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1]], 1), 1)
    image = (trans_before * alpha) @ every[:, 7:10]
    return image.T.reshape(3, rows_per_rank, width).contiguous()


def speed_of_light(size, world_size):
    g, h, w = size["gaussians"], size["rows_per_rank"], size["width"]
    return {"link_bytes_per_rank": (world_size - 1) * g * 10 * 4, "flops": 20 * h * w * world_size * g}
