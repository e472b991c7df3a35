"""RMSNorm backward over a hidden dimension sharded across tensor-parallel ranks.

When the normalised dimension itself is split over the tensor-parallel group (OLMo-2-style full-width
QK-norm under tensor parallelism, 2-D/1-D tensor-parallel norms as in Colossal-AI, the PKB `tp_rms_norm`
problem), the norm's statistics are sums over all shards. The backward pass (the formula of Apex/TE's
fused RMSNorm, recomputing rstd from x) needs two such sums per token, which can share one all-reduce:

    y      = x * rstd * gamma,           rstd = 1 / sqrt(sum_all(x^2) / hidden + eps)
    g      = dy * gamma
    dx     = rstd * g - x * rstd^3 * sum_all(g * x) / hidden
    dgamma = sum_tokens(dy * x * rstd)                  # this rank's slice of gamma's gradient

sum_all is over the full hidden dimension, i.e. over every rank's shard. Everything is computed in fp32
from bf16 inputs.

Inputs per rank: x, dy (tokens, hidden/ws) bf16, this rank's slice of the hidden dimension;
gamma (hidden/ws,) bf16; eps (float).
Outputs: dx (tokens, hidden/ws) bf16; dgamma (hidden/ws,) fp32.

Tolerance: dgamma is a sum over all tokens (values of order sqrt(tokens)), so its atol is 1e-3 rather
than 1e-5; rtol stays at the fp32 default.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "tp_rmsnorm_backward"
ID = 23
TITLE = "RMSNorm backward with the hidden dimension sharded over tensor-parallel ranks"
CATEGORY = "fused"
ORIGIN = ("Full-width QK-norm / RMSNorm under tensor parallelism (OLMo-2 under TP, Colossal-AI TP norms); "
          "Apex/TE fused RMSNorm backward")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
SIZES = {"screen": {"tokens": 64, "hidden": 128},
         "full": {"tokens": 16384, "hidden": 8192}}
OUTPUTS = [Output("dx", torch.bfloat16, shape=lambda s, ws, r: (s["tokens"], s["hidden"] // ws)),
           Output("dgamma", torch.float32, atol=1e-3, shape=lambda s, ws, r: (s["hidden"] // ws,))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    hl = s["hidden"] // ws
    x = ctx.randn(s["tokens"], hl, dtype=torch.bfloat16)
    dy = ctx.randn(s["tokens"], hl, dtype=torch.bfloat16)
    gamma = (1.0 + ctx.randn(hl, scale=0.2)).to(torch.bfloat16)
    return x, dy, gamma, 1e-6


def reference(x, dy, gamma, eps):
    hidden = x.shape[1] * dist.get_world_size()
    xf, dyf = x.float(), dy.float()
    g = dyf * gamma.float()
    sums = torch.stack([(xf * xf).sum(-1), (g * xf).sum(-1)])  # (2, tokens): both statistics in one all-reduce
    dist.all_reduce(sums)
    rstd = torch.rsqrt(sums[0] / hidden + eps)[:, None]
    dot = (sums[1] / hidden)[:, None]
    dx = rstd * g - xf * (rstd ** 3) * dot
    dgamma = (dyf * xf * rstd).sum(0)
    return dx.to(torch.bfloat16), dgamma


def speed_of_light(size, world_size):
    t, h = size["tokens"], size["hidden"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * 2 * t * 4,
            "flops": 10 * t * h / world_size}  # per rank
