"""LAMB optimizer step on sharded parameters: per-parameter trust ratios from global norms reduced over
the data-parallel group (NVIDIA Apex DistributedFusedLAMB; You et al., "Large Batch Optimization for
Deep Learning: Training BERT in 76 minutes").

LAMB scales each parameter's Adam update by a trust ratio ||w|| / ||u|| computed over the whole
parameter. With ZeRO-style sharding (each rank owns rows [r*R/ws, (r+1)*R/ws) of every parameter, its
gradient already reduce-scattered, and its Adam moments) the Adam part is local but the two norms of
every parameter are sums over all ranks' shards, so the sums of squares are all-reduced, one pair per
parameter, in one collective:

    m' = b1 m + (1 - b1) g          v' = b2 v + (1 - b2) g^2          (b1, b2 = 0.9, 0.999)
    u  = (m' / (1 - b1^t)) / (sqrt(v' / (1 - b2^t)) + eps) + wd * w      (eps 1e-6)
    trust[p] = ||w_p|| / ||u_p|| over the whole parameter p (1 where either norm is 0)
    w' = w - lr * trust[p] * u

Inputs per rank: w, g, m, v (P, R/ws, C) fp32, its shards of P parameters (stacked); v non-negative;
step t, lr, wd. Outputs: w', m', v' (P, R/ws, C) fp32. Tolerance: fp32 defaults (the norms are fp32
sums in any order), with atol scaled to each output's magnitude.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "sharded_lamb_step"
ID = 78
TITLE = "Sharded LAMB step: local Adam moments, all-reduced per-parameter norms, trust-ratio update"
CATEGORY = "fused"
ORIGIN = "NVIDIA Apex DistributedFusedLAMB (ZeRO-sharded LAMB, per-tensor norms all-reduced)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=32)  # ws divides the rows (32 at screen size)
# full: 32 parameters of 8192 x 4096 (1.07 B parameters), sharded over the ranks
SIZES = {"screen": {"params": 4, "rows": 32, "cols": 16}, "full": {"params": 32, "rows": 8192, "cols": 4096}}
BETA1, BETA2, EPS = 0.9, 0.999, 1e-6
_shard = lambda s, n, r: (s["params"], s["rows"] // n, s["cols"])  # noqa: E731
# atol about 1e-5 of each output's scale (w ~ 2e-2, m ~ 1e-3, v ~ 1e-6); rtol the fp32 default
OUTPUTS = [Output("w", torch.float32, atol=1e-7, shape=_shard), Output("m", torch.float32, atol=1e-8, shape=_shard),
           Output("v", torch.float32, atol=1e-11, shape=_shard)]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    shape = (s["params"], s["rows"] // n, s["cols"])
    w = ctx.randn(*shape, scale=0.02)
    g = ctx.randn(*shape, scale=1e-3)
    m = ctx.randn(*shape, scale=1e-3)
    v = ctx.randn(*shape, scale=1e-3).square()
    return w, g, m, v, 10, 1e-3, 0.01


def reference(w, g, m, v, step, lr, wd):
    m = BETA1 * m + (1 - BETA1) * g
    v = BETA2 * v + (1 - BETA2) * g * g
    u = (m / (1 - BETA1 ** step)) / ((v / (1 - BETA2 ** step)).sqrt() + EPS) + wd * w
    sums = torch.stack([w.square().sum((1, 2)), u.square().sum((1, 2))])    # (2, P)
    dist.all_reduce(sums)
    w_norm, u_norm = sums.sqrt()
    trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)
    return w - lr * trust[:, None, None] * u, m, v


def speed_of_light(size, world_size):
    p, r, c = size["params"], size["rows"], size["cols"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * 2 * p * 4, "flops": 16 * p * r * c / world_size}
