"""Causal ring attention combined with Megatron-LM tensor parallelism: a 2-D (cp x tp) mesh where the tp
ranks split the attention heads (column-parallel QKV, row-parallel output projection + all-reduce) and
the cp ranks run ring attention over the sequence for their heads (Megatron-LM context parallelism with
the zigzag load-balanced causal sharding of ring-flash-attention).

Mesh: tp = 2 (inner), cp = ws / 2; rank = cp_rank * 2 + tp_rank; the groups are built in make_inputs.
The global sequence (length S) is cut into 2*cp chunks of length c; cp rank i holds chunks i and
2*cp-1-i, concatenated: x of shape (B, 2c, D), identical on both tp ranks of a cp rank. With
D = H * Dh and the rows of the full w_qkv (3D, D) ordered (q, k, v) x (head) x (head dim), tp rank t owns
heads [t*H/2, (t+1)*H/2): w_qkv_s (3D/2, D) holds exactly those rows in the same order, and w_o_s
(D, D/2) the matching columns of w_o (D, D). The layer:

    qkv = x @ w_qkv_s^T                                    local tokens, local heads
    ring attention over the cp group (causal over global positions, scale 1/sqrt(Dh)): the K/V block
    goes around the ring, each step attends to the blocks causality needs (zigzag: from a lower cp rank
    only its first chunk, from a higher one only the local second chunk attends), online-softmax merge
    out = all-reduce over tp of (o @ w_o_s^T)              o: local heads concatenated in head order

Returns out (B, 2c, D), identical on both tp ranks.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes, warm_up
from tasks.parallelism._ring import ring_attention

SLUG = "ring_attention_tp"
ID = 60
TITLE = "Ring attention x tensor parallel: head-sharded QKV, causal K/V ring over cp, row-parallel all-reduce"
CATEGORY = "parallelism"
ORIGIN = ("Megatron-LM context parallelism (ring attention, zigzag) x tensor parallelism "
          "(ColumnParallelLinear QKV, RowParallelLinear proj)")
WORLD_SIZES = WorldSizes(min=4, max=16, power_of_two=True)
TP = 2
SIZES = {
    "screen": {"batch": 1, "seq": 64, "heads": 4, "head_dim": 8},
    "full": {"batch": 1, "seq": 16384, "heads": 16, "head_dim": 128},
}
OUTPUTS = [Output("out", torch.float32,
                  shape=lambda s, n, r: (s["batch"], s["seq"] // (n // TP), s["heads"] * s["head_dim"]))]


def make_inputs(ctx):
    s = ctx.size
    n, h, dh = ctx.world_size, s["heads"], s["head_dim"]
    cp, d = n // TP, h * dh
    tp_groups = [dist.new_group(list(range(i * TP, (i + 1) * TP))) for i in range(cp)]
    cp_groups = [dist.new_group(list(range(j, n, TP))) for j in range(TP)]
    ci, ti = divmod(ctx.rank, TP)
    c = s["seq"] // (2 * cp)
    x = ctx.randn(s["batch"], s["seq"], d, shared=True)
    x = torch.cat([x[:, ci * c:(ci + 1) * c], x[:, (2 * cp - 1 - ci) * c:(2 * cp - ci) * c]], 1)  # zigzag
    w_qkv = ctx.randn(3, h, dh, d, scale=d ** -0.5, shared=True)
    w_qkv = w_qkv[:, ti * h // TP:(ti + 1) * h // TP].reshape(3 * d // TP, d)        # column-parallel
    w_o = ctx.randn(d, d, scale=d ** -0.5, shared=True)[:, ti * d // TP:(ti + 1) * d // TP].contiguous()
    warm_up([tp_groups[ci], cp_groups[ti]], ctx.device)
    return x, w_qkv, w_o, dh, tp_groups[ci], cp_groups[ti]


def reference(x, w_qkv, w_o, head_dim, tp_group, cp_group):
    b, sl, d = x.shape
    hl = w_qkv.shape[0] // (3 * head_dim)
    qkv = (x @ w_qkv.t()).view(b, sl, 3, hl, head_dim).permute(2, 0, 3, 1, 4).contiguous()  # (3, B, hl, 2c, Dh)
    o = ring_attention(qkv[0], qkv[1], qkv[2], cp_group)
    out = o.transpose(1, 2).reshape(b, sl, hl * head_dim) @ w_o.t()
    dist.all_reduce(out, group=tp_group)
    return out


def speed_of_light(size, world_size):
    b, s, h, dh = size["batch"], size["seq"], size["heads"], size["head_dim"]
    cp, d = world_size // TP, h * dh
    sl = s // cp
    ring = (cp - 1) * 2 * b * sl * (h // TP) * dh * 4
    ar = 2 * (TP - 1) / TP * b * sl * d * 4
    flops = 2 * b * sl * d * 4 * d // TP + 4 * b * (h // TP) * dh * s * s / 2 / cp
    return {"link_bytes_per_rank": ring + ar, "flops": flops}
