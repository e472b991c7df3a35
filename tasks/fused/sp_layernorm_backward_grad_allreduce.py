"""LayerNorm backward under sequence parallelism: local input gradient on this rank's tokens, and the
weight and bias gradients summed over the tensor-parallel group (Megatron-LM sequence parallelism: the
LayerNorm parameters are replicated but see only 1/ws of the sequence, so finalize_model_grads
all-reduces their gradients, `_allreduce_layernorm_grads` / `sequence_parallel` parameters).

Rank r holds positions [r*S/ws, (r+1)*S/ws) of the LayerNorm input x and of the output gradient dy,
(S/ws, B, D) bf16, and the replicated weight gamma (D). Per token (statistics in fp32, eps 1e-5):

    x_hat  = (x - mean(x)) * rstd,   rstd = 1 / sqrt(var(x) + eps)      (biased variance)
    g      = dy * gamma
    dx     = rstd * (g - mean(g) - x_hat * mean(g * x_hat))             bf16, local
    dgamma = sum over all ranks' tokens of dy * x_hat                   fp32, all-reduced
    dbeta  = sum over all ranks' tokens of dy                           fp32, all-reduced

dgamma and dbeta are reduced together (one all-reduce of 2D values, as Megatron coalesces these
gradients). Outputs: dx (S/ws, B, D) bf16, dgamma and dbeta (D) fp32, identical on every rank.
Tolerance: dx bf16 defaults; dgamma and dbeta fp32 with atol 1e-4, since they are sums of S*B terms of
order one (values of order sqrt(S*B)) whose order differs between implementations.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "sp_layernorm_backward_grad_allreduce"
ID = 81
TITLE = "Sequence-parallel LayerNorm backward: local dx, dgamma/dbeta all-reduced over the TP group"
CATEGORY = "fused"
ORIGIN = "Megatron-LM sequence parallelism: LayerNorm backward + finalize_model_grads all-reduce of LayerNorm grads"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=64)  # ws divides the sequence
SIZES = {"screen": {"seq": 64, "batch": 2, "hidden": 64}, "full": {"seq": 8192, "batch": 2, "hidden": 8192}}
OUTPUTS = [Output("dx", torch.bfloat16, shape=lambda s, n, r: (s["seq"] // n, s["batch"], s["hidden"])),
           Output("dgamma", torch.float32, atol=1e-4, shape=lambda s, n, r: (s["hidden"],)),
           Output("dbeta", torch.float32, atol=1e-4, shape=lambda s, n, r: (s["hidden"],))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    shape = (s["seq"] // n, s["batch"], s["hidden"])
    x = (ctx.randn(*shape) * (1 + ctx.rand(*shape[:2], 1)) + ctx.randn(*shape[:2], 1)).to(torch.bfloat16)
    dy = ctx.randn(*shape, dtype=torch.bfloat16)
    gamma = (1 + ctx.randn(s["hidden"], scale=0.1, shared=True)).to(torch.bfloat16)
    return x, dy, gamma, 1e-5


def reference(x, dy, gamma, eps):
    xf, dyf = x.float(), dy.float()
    mean = xf.mean(-1, keepdim=True)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False, keepdim=True) + eps)
    x_hat = (xf - mean) * rstd
    g = dyf * gamma.float()
    dx = rstd * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    grads = torch.cat([(dyf * x_hat).sum((0, 1)), dyf.sum((0, 1))])
    dist.all_reduce(grads)
    dgamma, dbeta = grads.chunk(2)
    return dx.to(x.dtype), dgamma, dbeta


def speed_of_light(size, world_size):
    s, b, d = size["seq"], size["batch"], size["hidden"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * 2 * d * 4, "flops": 12 * s * b * d / world_size}
