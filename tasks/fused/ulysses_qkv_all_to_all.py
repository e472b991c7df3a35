"""QKV projection + Ulysses all-to-all (sequence -> heads): DeepSpeed-Ulysses sequence parallelism.

In DeepSpeed-Ulysses each rank holds a sequence shard and the full (replicated) attention weights. After
the QKV projection an all-to-all re-shards the activations from "my tokens, all heads" to "all tokens, my
heads", so that attention runs locally per head (VeOmni/verl gather_seq_scatter_heads_qkv):

    qkv = (x @ w_qkv.T).view(seq/ws, 3, heads, head_dim)     # bf16 GEMM
    out = all_to_all(qkv): rank r receives heads [r*heads/ws, (r+1)*heads/ws) of every rank's tokens
          -> (seq, 3, heads/ws, head_dim), tokens in sequence order (rank i's shard = rows [i*seq/ws, ...))

Inputs per rank: x (seq/ws, hidden) bf16; w_qkv (3*heads*head_dim, hidden) bf16, identical on all ranks
(rows: all q heads, then k, then v; scaled by 1/sqrt(hidden)).
Output: qkv (seq, 3, heads/ws, head_dim) bf16.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "ulysses_qkv_all_to_all"
ID = 41
TITLE = "QKV projection + Ulysses all-to-all (sequence-sharded -> head-sharded)"
CATEGORY = "fused"
ORIGIN = "DeepSpeed-Ulysses DistributedAttention (_SeqAllToAll); VeOmni/verl gather_seq_scatter_heads_qkv"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=8)
# full: a 64k-token sequence through a Llama-2-7B-sized attention (hidden 4096, 32 heads x 128)
SIZES = {"screen": {"seq": 64, "hidden": 64, "heads": 8, "head_dim": 8},
         "full": {"seq": 65536, "hidden": 4096, "heads": 32, "head_dim": 128}}
OUTPUTS = [Output("qkv", torch.bfloat16,
                  shape=lambda s, ws, r: (s["seq"], 3, s["heads"] // ws, s["head_dim"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    x = ctx.randn(s["seq"] // ws, s["hidden"], dtype=torch.bfloat16)
    w_qkv = ctx.randn(3 * s["heads"] * s["head_dim"], s["hidden"], dtype=torch.bfloat16,
                      scale=s["hidden"] ** -0.5, shared=True)
    return x, w_qkv, s["heads"]


def reference(x, w_qkv, heads):
    ws = dist.get_world_size()
    n = x.shape[0]
    d = w_qkv.shape[0] // (3 * heads)
    qkv = (x @ w_qkv.t()).view(n, 3, ws, heads // ws, d)
    send = qkv.permute(2, 0, 1, 3, 4).contiguous()            # (dest rank, tokens, 3, heads/ws, d)
    recv = torch.empty_like(send)                              # (source rank, tokens, 3, heads/ws, d)
    dist.all_to_all_single(recv, send)
    return recv.reshape(ws * n, 3, heads // ws, d)


def speed_of_light(size, world_size):
    s, h, hd = size["seq"], size["hidden"], size["heads"] * size["head_dim"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * s / world_size * 3 * hd * 2,
            "flops": 2 * s / world_size * h * 3 * hd}  # per rank
