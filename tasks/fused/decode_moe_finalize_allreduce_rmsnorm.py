"""MoE finalize + all-reduce + residual add + RMSNorm at decode batch sizes: TensorRT-LLM's
MoEAllReduce (AllReduceFusionOp.MOE_FINALIZE_ALLREDUCE_RESIDUAL_RMS_NORM), used for DeepSeek-V3 decode.

At decode a tensor-parallel MoE layer processes a handful of tokens. Every rank holds a slice of every
expert's FFN (TP-sharded experts) and of the shared expert, so each of the k routed expert outputs and
the shared expert output it computed are partial sums. The layer epilogue weights the routed outputs by
the router scores, adds the shared expert, reduces across ranks, adds the residual and applies the next
layer's input RMSNorm:

    moe      = sum_j scales[t, j] * expert_out[t, j] + shared_out     fp32, rounded to bf16 (partial)
    s        = all_reduce(moe)                                         bf16, as NCCL reduces
    r        = s + residual                                            fp32, residual_out = bf16(r)
    y        = bf16(r * rsqrt(mean(r^2) + eps)) * gamma

The messages are tiny (tokens x hidden bf16: 112 KiB at full size), so this task measures latency: a
one-shot all-reduce over NVLink fused with the epilogue beats NCCL's ring by a wide margin.

Inputs per rank: expert_out (tokens, k, hidden) bf16 and shared_out (tokens, hidden) bf16, its partials
(scaled so the sum is O(1)); scales (tokens, k) fp32 router weights, residual (tokens, hidden) bf16 and
gamma (hidden,) bf16, identical on all ranks; eps. Outputs: y and residual_out (tokens, hidden) bf16.

Tolerance: bf16 defaults with atol 2e-2: the partial is rounded to bf16 before the reduction and the
bf16 sum's rounding order differs between implementations (fused kernels accumulate in fp32).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "decode_moe_finalize_allreduce_rmsnorm"
ID = 69
TITLE = "Decode MoE finalize (router-weighted sum) + all-reduce + residual + RMSNorm, small messages"
CATEGORY = "fused"
ORIGIN = "TensorRT-LLM MoEAllReduce (MOE_FINALIZE_ALLREDUCE_RESIDUAL_RMS_NORM), DeepSeek-V3 decode with TP experts"
WORLD_SIZES = WorldSizes(min=1)  # 1: the all-reduce is the identity; scored on one GPU too
# full: DeepSeek-V3 hidden 7168, top-8 routing, a decode step of 8 tokens
SIZES = {"screen": {"tokens": 4, "topk": 4, "hidden": 64}, "full": {"tokens": 8, "topk": 8, "hidden": 7168}}
_shape = lambda s, n, r: (s["tokens"], s["hidden"])  # noqa: E731
OUTPUTS = [Output("y", torch.bfloat16, atol=2e-2, shape=_shape),
           Output("residual_out", torch.bfloat16, atol=2e-2, shape=_shape)]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    t, k, h = s["tokens"], s["topk"], s["hidden"]
    expert_out = ctx.randn(t, k, h, dtype=torch.bfloat16, scale=n ** -0.5)
    shared_out = ctx.randn(t, h, dtype=torch.bfloat16, scale=n ** -0.5)
    scales = ctx.randn(t, k, shared=True).softmax(-1)
    residual = ctx.randn(t, h, dtype=torch.bfloat16, shared=True)
    gamma = (1.0 + ctx.randn(h, scale=0.2, shared=True)).to(torch.bfloat16)
    return expert_out, scales, shared_out, residual, gamma, 1e-6


def reference(expert_out, scales, shared_out, residual, gamma, eps):
    moe = torch.einsum("tk,tkh->th", scales, expert_out.float()) + shared_out.float()
    s = moe.to(expert_out.dtype)
    dist.all_reduce(s)
    r = s.float() + residual.float()
    y = r * torch.rsqrt(r.square().mean(-1, keepdim=True) + eps)
    return y.to(residual.dtype) * gamma, r.to(residual.dtype)


def speed_of_light(size, world_size):
    t, k, h = size["tokens"], size["topk"], size["hidden"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * t * h * 2, "flops": 2 * t * k * h + 6 * t * h}
