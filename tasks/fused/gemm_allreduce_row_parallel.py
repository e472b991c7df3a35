"""GEMM + all-reduce: the row-parallel linear layer of tensor-parallel inference (vLLM, Megatron-LM).

Without sequence parallelism a RowParallelLinear (attention o_proj, MLP down_proj) all-reduces the
partial GEMM results so that every tensor-parallel rank holds the full output. vLLM's RowParallelLinear
adds the bias on rank 0 only, inside the GEMM, so that it is counted once by the all-reduce:

    partial = x @ w.T (+ b on rank 0)                # (tokens, out_features), a partial sum
    y       = all_reduce(partial)                    # (tokens, out_features) on every rank

This is the pattern that GEMM + all-reduce fusions target (e.g. FlashInfer/TRT-LLM fused all-reduce,
Flux, the PKB `gemm_allreduce` problem).

Inputs per rank: x (tokens, in_features/ws) bf16; w (out_features, in_features/ws) bf16, this rank's
columns of the weight (scaled by 1/sqrt(in_features)); b (out_features,) bf16, the bias, identical on
all ranks.
Output: y (tokens, out_features) bf16, identical on all ranks.

Tolerance: the sum over ranks happens in bf16 (NCCL all-reduce), so atol is 2e-2 on O(1) outputs (see
gemm_reduce_scatter_row_parallel).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "gemm_allreduce_row_parallel"
ID = 22
TITLE = "GEMM + all-reduce (row-parallel linear with bias)"
CATEGORY = "fused"
ORIGIN = "vLLM RowParallelLinear (reduce_results=True); Megatron-LM RowParallelLinear without sequence parallelism"
WORLD_SIZES = WorldSizes(min=1, power_of_two=True)  # 1: TP of one; scored on one GPU too
# full: Llama-3-70B down_proj (28672 -> 8192), a 4096-token prefill chunk
SIZES = {"screen": {"tokens": 64, "in_features": 128, "out_features": 96},
         "full": {"tokens": 4096, "in_features": 28672, "out_features": 8192}}
OUTPUTS = [Output("y", torch.bfloat16, atol=2e-2, shape=lambda s, ws, r: (s["tokens"], s["out_features"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    x = ctx.randn(s["tokens"], s["in_features"] // ws, dtype=torch.bfloat16)
    w = ctx.randn(s["out_features"], s["in_features"] // ws, dtype=torch.bfloat16,
                  scale=s["in_features"] ** -0.5)
    b = ctx.randn(s["out_features"], dtype=torch.bfloat16, scale=0.5, shared=True)
    return x, w, b


def reference(x, w, b):
    y = F.linear(x, w, b if dist.get_rank() == 0 else None)
    dist.all_reduce(y)
    return y


def speed_of_light(size, world_size):
    t, k, n = size["tokens"], size["in_features"], size["out_features"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * t * n * 2,
            "flops": 2 * t * k * n / world_size}  # per rank
