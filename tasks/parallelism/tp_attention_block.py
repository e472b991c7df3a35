"""Forward of a causal self-attention block under Megatron-LM tensor parallelism (Shoeybi et al.,
"Megatron-LM"): column-parallel QKV projection, attention over the local heads, row-parallel output
projection and an all-reduce.

The tensor-parallel group is the whole world; attention heads are split over it. Every rank holds the
same activations x (B, S, D) (the input of a TP region is replicated), its slice of the QKV weight,
w_qkv (3 * H/ws * Dh, D) = the rows of W_q, then W_k, then W_v for heads [r*H/ws, (r+1)*H/ws), the
matching columns of the output projection, w_o (D, H/ws * Dh), and the replicated output bias b_o (D):

    q, k, v = split(x @ w_qkv^T)                   (B, S, H/ws, Dh) each, no communication
    ctx     = causal softmax(q k^T / sqrt(Dh)) v   per local head
    partial = ctx @ w_o^T                          a partial sum over the head groups
    out     = all_reduce(partial) + b_o            (B, S, D), identical on every rank

All tensors are bf16. Output: out (B, S, D) bf16. Tolerance: bf16 defaults with atol 2e-2: the
all-reduce sums bf16 partials whose rounding order differs between implementations, and attention
kernels accumulate differently (flash vs math).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "tp_attention_block"
ID = 67
TITLE = ("Tensor-parallel attention block forward: column-parallel QKV, local-head attention, "
         "row-parallel out-proj + all-reduce")
CATEGORY = "parallelism"
ORIGIN = "Megatron-LM ParallelAttention (ColumnParallelLinear QKV, RowParallelLinear dense + all-reduce)"
WORLD_SIZES = WorldSizes(min=2, max=8, power_of_two=True)  # ws divides the heads (8 at screen size)
# full: a Llama-2-70B-sized block without GQA (64 heads of 128) on a 4096-token sequence
SIZES = {"screen": {"batch": 1, "seq": 32, "heads": 8, "head_dim": 8},
         "full": {"batch": 1, "seq": 4096, "heads": 64, "head_dim": 128}}
OUTPUTS = [Output("out", torch.bfloat16, atol=2e-2,
                  shape=lambda s, n, r: (s["batch"], s["seq"], s["heads"] * s["head_dim"]))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    h, dh = s["heads"], s["head_dim"]
    d, hl = h * dh, h // n
    x = ctx.randn(s["batch"], s["seq"], d, dtype=torch.bfloat16, shared=True)
    # this rank's slices of the full weights: rows of W_q, W_k, W_v and columns of W_o for its heads
    w_qkv = ctx.randn(3 * hl * dh, d, dtype=torch.bfloat16, scale=d ** -0.5)
    w_o = ctx.randn(d, hl * dh, dtype=torch.bfloat16, scale=d ** -0.5)
    b_o = ctx.randn(d, dtype=torch.bfloat16, scale=0.1, shared=True)
    return x, w_qkv, w_o, b_o, dh


def reference(x, w_qkv, w_o, b_o, head_dim):
    b, s, _ = x.shape
    q, k, v = (x @ w_qkv.t()).view(b, s, 3, -1, head_dim).permute(2, 0, 3, 1, 4).unbind(0)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)      # (B, H/ws, S, Dh)
    out = ctx.transpose(1, 2).reshape(b, s, -1) @ w_o.t()
    dist.all_reduce(out)
    return out + b_o


def speed_of_light(size, world_size):
    b, s, h, dh = size["batch"], size["seq"], size["heads"], size["head_dim"]
    d = h * dh
    flops = (2 * b * s * d * 4 * d + 2 * b * s * s * d) / world_size   # projections + causal attention
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * b * s * d * 2, "flops": flops}
