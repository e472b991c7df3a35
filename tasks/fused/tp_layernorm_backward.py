"""LayerNorm backward over a hidden dimension sharded across tensor-parallel ranks.

In 1-D/2-D tensor parallelism that keeps activations split along the hidden dimension (Colossal-AI's
LayerNorm2D and LayerNorm1D, Optimus/2-D TP), the LayerNorm statistics are reductions over every rank's
slice. Colossal-AI's LayerNorm2D computes E[x] and Var[x] with all-reduces over the row group in the
forward pass, and its backward all-reduces sum(dy*gamma) and sum(dy*gamma*x_hat) per token. This task
is that backward pass, recomputing the statistics from x (memory-efficient norm), all in fp32:

    mu     = sum_all(x) / hidden
    var    = sum_all((x - mu)^2) / hidden,     rstd = 1 / sqrt(var + eps)
    x_hat  = (x - mu) * rstd,                  g = dy * gamma
    dx     = rstd * (g - sum_all(g) / hidden - x_hat * sum_all(g * x_hat) / hidden)
    dgamma = sum_tokens(dy * x_hat),           dbeta = sum_tokens(dy)     # this rank's slices

sum_all runs over the full hidden dimension, i.e. over all ranks' shards.

Inputs per rank: x, dy (tokens, hidden/ws) bf16; gamma (hidden/ws,) bf16; eps (float).
Outputs: dx (tokens, hidden/ws) bf16; dgamma, dbeta (hidden/ws,) fp32.

Tolerance: dgamma and dbeta are sums over all tokens (values of order sqrt(tokens)), so their atol is
1e-3; rtol stays at the fp32 default.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "tp_layernorm_backward"
ID = 24
TITLE = "LayerNorm backward with the hidden dimension sharded over tensor-parallel ranks"
CATEGORY = "fused"
ORIGIN = ("Colossal-AI 2-D/1-D tensor parallelism LayerNorm2D/LayerNorm1D (statistics all-reduced over the "
          "hidden shards)")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
SIZES = {"screen": {"tokens": 64, "hidden": 128},
         "full": {"tokens": 16384, "hidden": 8192}}
_shard = lambda s, ws, r: (s["tokens"], s["hidden"] // ws)  # noqa: E731
_vec = lambda s, ws, r: (s["hidden"] // ws,)  # noqa: E731
OUTPUTS = [Output("dx", torch.bfloat16, shape=_shard),
           Output("dgamma", torch.float32, atol=1e-3, shape=_vec),
           Output("dbeta", torch.float32, atol=1e-3, shape=_vec)]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    hl = s["hidden"] // ws
    # activations with a per-token offset and scale, as a residual stream has
    x = (ctx.randn(s["tokens"], hl) * (1.0 + ctx.rand(s["tokens"], 1, shared=True))
         + ctx.randn(s["tokens"], 1, shared=True)).to(torch.bfloat16)
    dy = ctx.randn(s["tokens"], hl, dtype=torch.bfloat16)
    gamma = (1.0 + ctx.randn(hl, scale=0.2)).to(torch.bfloat16)
    return x, dy, gamma, 1e-5


def reference(x, dy, gamma, eps):
    hidden = x.shape[1] * dist.get_world_size()
    xf, dyf = x.float(), dy.float()
    mu = xf.sum(-1)
    dist.all_reduce(mu)
    mu = (mu / hidden)[:, None]
    xc = xf - mu
    var = (xc * xc).sum(-1)
    dist.all_reduce(var)
    rstd = torch.rsqrt(var / hidden + eps)[:, None]
    x_hat = xc * rstd
    g = dyf * gamma.float()
    sums = torch.stack([g.sum(-1), (g * x_hat).sum(-1)])  # (2, tokens)
    dist.all_reduce(sums)
    dx = rstd * (g - (sums[0] / hidden)[:, None] - x_hat * (sums[1] / hidden)[:, None])
    dgamma = (dyf * x_hat).sum(0)
    dbeta = dyf.sum(0)
    return dx.to(torch.bfloat16), dgamma, dbeta


def speed_of_light(size, world_size):
    t, h = size["tokens"], size["hidden"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * 4 * t * 4,
            "flops": 14 * t * h / world_size}  # per rank
