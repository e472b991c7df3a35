"""GEMM + reduce-scatter: Megatron-LM's row-parallel linear layer under sequence parallelism.

The MLP's fc2 (and the attention output projection) is a RowParallelLinear: each tensor-parallel rank
holds a slice of the input features and the matching columns of the weight, so its GEMM yields a partial
sum of the full output. With sequence parallelism the partial sums are reduce-scattered along the
sequence instead of all-reduced, leaving each rank its sequence shard of the block output:

    partial = x @ w.T                                # (tokens, hidden), a partial sum
    y       = reduce_scatter(partial, dim=0)         # (tokens / world_size, hidden)

PyTorch async-TP (`torch.ops.symm_mem.fused_matmul_reduce_scatter`, torchtitan) and Megatron/TE
userbuffers overlap this reduce-scatter with the GEMM.

Inputs per rank: x (tokens, ffn/ws) bf16, all tokens with this rank's slice of the ffn features;
w (hidden, ffn/ws) bf16, this rank's columns of the fc2 weight (scaled by 1/sqrt(ffn), so y is O(1)).
Output: y (tokens/ws, hidden) bf16, rank r's rows [r*tokens/ws, (r+1)*tokens/ws) of the summed result.

Tolerance: the reduction over ranks happens in bf16 (as NCCL's reduce-scatter does), whose rounding
order differs between implementations; at 8 ranks this reaches about 1.5e-2 absolute on O(1) outputs,
so atol is 2e-2 (rtol stays the bf16 default).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "gemm_reduce_scatter_row_parallel"
ID = 21
TITLE = "GEMM + reduce-scatter (sequence-parallel row-parallel linear)"
CATEGORY = "fused"
ORIGIN = "Megatron-LM RowParallelLinear with sequence_parallel; PyTorch async-TP fused_matmul_reduce_scatter"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
# full: Llama-3-70B MLP fc2 (ffn 28672 -> hidden 8192), 8192 tokens per TP group
SIZES = {"screen": {"tokens": 128, "hidden": 64, "ffn": 128},
         "full": {"tokens": 8192, "hidden": 8192, "ffn": 28672}}
OUTPUTS = [Output("y", torch.bfloat16, atol=2e-2, shape=lambda s, ws, r: (s["tokens"] // ws, s["hidden"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    x = ctx.randn(s["tokens"], s["ffn"] // ws, dtype=torch.bfloat16)
    w = ctx.randn(s["hidden"], s["ffn"] // ws, dtype=torch.bfloat16, scale=s["ffn"] ** -0.5)
    return x, w


def reference(x, w):
    ws = dist.get_world_size()
    partial = x @ w.t()
    y = torch.empty(partial.shape[0] // ws, partial.shape[1], dtype=partial.dtype, device=partial.device)
    dist.reduce_scatter_tensor(y, partial)
    return y


def speed_of_light(size, world_size):
    t, h, f = size["tokens"], size["hidden"], size["ffn"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * t * h * 2,
            "flops": 2 * t * h * f / world_size}  # per rank
