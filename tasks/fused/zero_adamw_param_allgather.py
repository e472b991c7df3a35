"""Sharded AdamW step + bf16 parameter all-gather: Megatron-LM's DistributedOptimizer (ZeRO-1/2).

With a distributed optimizer each data-parallel rank owns a contiguous shard of the flat parameter
buffer: its fp32 master weights, Adam moments and (already reduce-scattered) gradient. After the step the
updated shard is cast to the bf16 model dtype and all-gathered so that every rank holds the full bf16
parameters for the next forward pass. The step is torch.optim.AdamW's (decoupled weight decay, bias
correction with the step count t >= 1), in fp32:

    m' = b1 * m + (1 - b1) * g
    v' = b2 * v + (1 - b2) * g^2
    p' = p * (1 - lr * wd) - lr * (m' / (1 - b1^t)) / (sqrt(v' / (1 - b2^t)) + eps)
    params = all_gather(p'.to(bf16))

Inputs per rank: master, grad, m, v (numel/ws,) fp32, rank r's shard of the flat buffer; step () int64
(identical on all ranks, as a capturable optimizer keeps it on the device); lr, beta1, beta2, eps,
weight_decay (floats).
Outputs: params (numel,) bf16, identical on all ranks; master', m', v' (numel/ws,) fp32.

Tolerances follow each output's scale (parameters ~2e-2, m ~3e-3, v ~1e-4): atol is set well below the
values so that a missing update (about lr = 1e-3 per element) fails. params: rtol 1e-2 (at most one bf16
ulp away), atol 1e-6.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "zero_adamw_param_allgather"
ID = 30
TITLE = "Sharded AdamW step + bf16 parameter all-gather (distributed optimizer)"
CATEGORY = "fused"
ORIGIN = ("Megatron-LM DistributedOptimizer (step on fp32 main-param shards, then bf16 param all-gather); "
          "DeepSpeed ZeRO-1/2")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
SIZES = {"screen": {"numel": 4096}, "full": {"numel": 2**30}}  # full: a 1.07 B-parameter buffer
_shard = lambda s, ws, r: (s["numel"] // ws,)  # noqa: E731
OUTPUTS = [Output("params", torch.bfloat16, rtol=1e-2, atol=1e-6, shape=lambda s, ws, r: (s["numel"],)),
           Output("master", torch.float32, atol=1e-8, shape=_shard),
           Output("exp_avg", torch.float32, atol=1e-9, shape=_shard),
           Output("exp_avg_sq", torch.float32, atol=1e-12, shape=_shard)]


def make_inputs(ctx):
    n = ctx.size["numel"] // ctx.world_size
    master = ctx.randn(n, scale=0.02)
    grad = ctx.randn(n, scale=0.01)
    m = ctx.randn(n, scale=0.003)
    v = (0.1 + ctx.rand(n)) * 1e-4
    step = ctx.randint(10, 2000, (), shared=True)
    return master, grad, m, v, step, 1e-3, 0.9, 0.95, 1e-8, 0.1


def reference(master, grad, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay):
    ws = dist.get_world_size()
    m = beta1 * exp_avg + (1 - beta1) * grad
    v = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
    t = step.to(torch.float32)
    bc1 = 1 - beta1 ** t
    bc2 = 1 - beta2 ** t
    p = master * (1 - lr * weight_decay) - lr * (m / bc1) / ((v / bc2).sqrt() + eps)
    params = torch.empty(ws * p.numel(), dtype=torch.bfloat16, device=p.device)
    dist.all_gather_into_tensor(params, p.to(torch.bfloat16))
    return params, p, m, v


def speed_of_light(size, world_size):
    n = size["numel"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * n * 2,
            "flops": 12 * n / world_size}  # per rank
