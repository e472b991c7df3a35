"""Attention output projection + reduce-scatter + bias + residual add: Megatron-LM's self-attention
linear_proj (RowParallelLinear, sequence parallel) followed by the fused bias-dropout-add.

Each tensor-parallel rank holds the attention context of its heads for the full sequence. The output
projection multiplies it by the matching columns of W_o, giving a partial sum; with sequence parallelism
the partial sums are reduce-scattered along the sequence, and the bias and the residual (already
sequence-sharded) are added (Megatron's bias_dropout_add_fused with dropout off):

    partial = attn_ctx.reshape(seq, heads/ws * head_dim) @ w_o.T  # (seq, hidden)
    out     = reduce_scatter(partial, dim=0) + bias + residual    # (seq/ws, hidden)

The bias and residual are added in fp32 to the bf16 reduce-scatter result and rounded once.

Inputs per rank: attn_ctx (seq, heads/ws, head_dim) bf16; w_o (hidden, heads/ws * head_dim) bf16 (scaled by
1/sqrt(heads*head_dim)); bias (hidden,) bf16, identical on all ranks; residual (seq/ws, hidden) bf16.
Output: out (seq/ws, hidden) bf16.

Tolerance: the reduction over ranks is a bf16 sum (NCCL), so atol is 2e-2 (see
gemm_reduce_scatter_row_parallel).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "attn_out_proj_rs_residual"
ID = 38
TITLE = "Attention output projection + reduce-scatter + bias + residual"
CATEGORY = "fused"
ORIGIN = "Megatron-LM SelfAttention.linear_proj (RowParallelLinear, sequence_parallel) + bias_dropout_add_fused"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
# full: Llama-3-70B attention (64 heads x 128 = 8192), 8192 tokens per TP group
SIZES = {"screen": {"seq": 64, "heads": 16, "head_dim": 8, "hidden": 96},
         "full": {"seq": 8192, "heads": 64, "head_dim": 128, "hidden": 8192}}
OUTPUTS = [Output("out", torch.bfloat16, atol=2e-2, shape=lambda s, ws, r: (s["seq"] // ws, s["hidden"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    h_local = s["heads"] // ws
    attn_ctx = ctx.randn(s["seq"], h_local, s["head_dim"], dtype=torch.bfloat16)
    w_o = ctx.randn(s["hidden"], h_local * s["head_dim"], dtype=torch.bfloat16,
                    scale=(s["heads"] * s["head_dim"]) ** -0.5)
    bias = ctx.randn(s["hidden"], dtype=torch.bfloat16, scale=0.1, shared=True)
    residual = ctx.randn(s["seq"] // ws, s["hidden"], dtype=torch.bfloat16)
    return attn_ctx, w_o, bias, residual


def reference(attn_ctx, w_o, bias, residual):
    ws = dist.get_world_size()
    partial = attn_ctx.reshape(attn_ctx.shape[0], -1) @ w_o.t()
    out = torch.empty(partial.shape[0] // ws, partial.shape[1], dtype=partial.dtype, device=partial.device)
    dist.reduce_scatter_tensor(out, partial)
    return (out.float() + bias.float() + residual.float()).to(out.dtype)


def speed_of_light(size, world_size):
    s, hd, h = size["seq"], size["heads"] * size["head_dim"], size["hidden"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * s * h * 2,
            "flops": 2 * s * hd * h / world_size}  # per rank
