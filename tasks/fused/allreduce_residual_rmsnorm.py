"""All-reduce + residual add + RMSNorm, fused: the tensor-parallel inference epilogue that vLLM
(AllReduceFusionPass with FlashInfer's trtllm_allreduce_fusion) and TensorRT-LLM
(AllReduceFusionOp.RESIDUAL_RMS_NORM) fuse into one kernel.

After a row-parallel linear (o_proj / down_proj) each tensor-parallel rank holds a partial sum; the next
operations are the residual add and the next layer's input RMSNorm (vLLM fused_add_rms_norm):

    s        = all_reduce(partial)                 # bf16, as NCCL reduces
    r        = s.float() + residual.float()
    residual_out = r.to(bf16)
    y        = (r * rsqrt(mean(r^2) + eps)).to(bf16) * gamma

Inputs per rank: partial (tokens, hidden) bf16 (scaled so the sum is O(1)); residual (tokens, hidden)
bf16 and gamma (hidden,) bf16, identical on all ranks (the residual stream is replicated across TP);
eps (float).
Outputs: y, residual_out (tokens, hidden) bf16, identical on all ranks.

Tolerance: the all-reduce is a bf16 sum whose rounding order differs between implementations (a fused
kernel usually accumulates in fp32), so atol is 2e-2 on these O(1) outputs.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "allreduce_residual_rmsnorm"
ID = 37
TITLE = "All-reduce + residual add + RMSNorm (fused TP epilogue)"
CATEGORY = "fused"
ORIGIN = ("vLLM AllReduceFusionPass / FlashInfer trtllm_allreduce_fusion; "
          "TensorRT-LLM AllReduceFusionOp.RESIDUAL_RMS_NORM")
WORLD_SIZES = WorldSizes(min=1)  # 1: tensor parallelism of one (the all-reduce is the identity); scored on one GPU too
# full: Llama-3-70B hidden 8192, an 8192-token prefill batch
SIZES = {"screen": {"tokens": 64, "hidden": 128}, "full": {"tokens": 8192, "hidden": 8192}}
_shape = lambda s, ws, r: (s["tokens"], s["hidden"])  # noqa: E731
OUTPUTS = [Output("y", torch.bfloat16, atol=2e-2, shape=_shape),
           Output("residual_out", torch.bfloat16, atol=2e-2, shape=_shape)]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    partial = ctx.randn(s["tokens"], s["hidden"], dtype=torch.bfloat16, scale=ws ** -0.5)
    residual = ctx.randn(s["tokens"], s["hidden"], dtype=torch.bfloat16, shared=True)
    gamma = (1.0 + ctx.randn(s["hidden"], scale=0.2, shared=True)).to(torch.bfloat16)
    return partial, residual, gamma, 1e-5


def reference(partial, residual, gamma, eps):
    s = partial.clone()
    dist.all_reduce(s)
    r = s.float() + residual.float()
    y = r * torch.rsqrt(r.square().mean(-1, keepdim=True) + eps)
    return y.to(partial.dtype) * gamma, r.to(partial.dtype)


def speed_of_light(size, world_size):
    t, h = size["tokens"], size["hidden"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * t * h * 2, "flops": 6 * t * h}
