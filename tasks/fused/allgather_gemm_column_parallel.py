"""All-gather + GEMM: Megatron-LM's column-parallel linear layer under sequence parallelism.

With sequence parallelism (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models") the activations between transformer blocks are split along the sequence over the
tensor-parallel group. A ColumnParallelLinear (the QKV projection or the MLP's fc1) first all-gathers the
sequence shards, then multiplies by this rank's rows of the nn.Linear weight:

    x_full = all_gather(x, dim=0)          # (tokens, hidden)
    y      = x_full @ w.T                  # (tokens, out_features / world_size)

PyTorch async-TP (`torch.ops.symm_mem.fused_all_gather_matmul`, used by torchtitan) and Megatron/TE
userbuffers overlap exactly this all-gather with the GEMM.

Inputs per rank: x (tokens/ws, hidden) bf16, this rank's sequence shard (rank r holds rows
[r*tokens/ws, (r+1)*tokens/ws)); w (out_features/ws, hidden) bf16, this rank's rows of the weight
(scaled by 1/sqrt(hidden), so y is O(1)).
Output: y (tokens, out_features/ws) bf16, all tokens in sequence order.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "allgather_gemm_column_parallel"
ID = 20
TITLE = "All-gather + GEMM (sequence-parallel column-parallel linear)"
CATEGORY = "fused"
ORIGIN = "Megatron-LM ColumnParallelLinear with sequence_parallel; PyTorch async-TP fused_all_gather_matmul"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
# full: Llama-3-70B MLP fc1 (hidden 8192 -> ffn 28672), 8192 tokens per TP group
SIZES = {"screen": {"tokens": 128, "hidden": 64, "out_features": 128},
         "full": {"tokens": 8192, "hidden": 8192, "out_features": 28672}}
OUTPUTS = [Output("y", torch.bfloat16, shape=lambda s, ws, r: (s["tokens"], s["out_features"] // ws))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    x = ctx.randn(s["tokens"] // ws, s["hidden"], dtype=torch.bfloat16)
    w = ctx.randn(s["out_features"] // ws, s["hidden"], dtype=torch.bfloat16, scale=s["hidden"] ** -0.5)
    return x, w


def reference(x, w):
    ws = dist.get_world_size()
    x_full = torch.empty(ws * x.shape[0], x.shape[1], dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(x_full, x)
    return x_full @ w.t()


def speed_of_light(size, world_size):
    t, h, n = size["tokens"], size["hidden"], size["out_features"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * t * h * 2,
            "flops": 2 * t * h * n / world_size}  # per rank
