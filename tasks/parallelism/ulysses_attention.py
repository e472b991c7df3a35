"""DeepSpeed-Ulysses sequence-parallel causal self-attention layer: the sequence is sharded, an
all-to-all turns it into head sharding for attention, a second all-to-all turns it back.

Every rank holds a contiguous chunk of the sequence, x of shape (B, S/ws, D) (rank r: positions
[r*S/ws, (r+1)*S/ws)), and the replicated projections w_qkv (3D, D) and w_o (D, D); D = H * Dh, and
the rows of w_qkv are (q, k, v) x (head) x (head dim). The layer:

    qkv = x @ w_qkv^T                                   (local tokens, all heads)
    all-to-all: sequence-sharded -> head-sharded        rank r gets heads [r*H/ws, (r+1)*H/ws) for
                                                        the whole sequence, in position order
    o = causal softmax(q k^T / sqrt(Dh)) v              per local head, over the full sequence
    all-to-all: head-sharded -> sequence-sharded        back to the local chunk, all heads
    out = o @ w_o^T                                     (heads concatenated in head order)

Returns out (B, S/ws, D).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "ulysses_attention"
ID = 58
TITLE = "DeepSpeed-Ulysses attention: QKV projection, seq->head all-to-all, causal attention, head->seq all-to-all"
CATEGORY = "parallelism"
ORIGIN = "DeepSpeed-Ulysses (DistributedAttention: all-to-all sequence/head re-sharding around local attention)"
WORLD_SIZES = WorldSizes(min=2, max=8, power_of_two=True)  # heads split over ranks: ws must divide H = 8
SIZES = {
    "screen": {"batch": 1, "seq": 64, "heads": 8, "head_dim": 8},
    "full": {"batch": 1, "seq": 16384, "heads": 16, "head_dim": 128},
}
OUTPUTS = [Output("out", torch.float32,
                  shape=lambda s, n, r: (s["batch"], s["seq"] // n, s["heads"] * s["head_dim"]))]


def make_inputs(ctx):
    s = ctx.size
    n = ctx.world_size
    d = s["heads"] * s["head_dim"]
    x = ctx.randn(s["batch"], s["seq"] // n, d)               # this rank's chunk of the sequence
    w_qkv = ctx.randn(3 * d, d, scale=d ** -0.5, shared=True)
    w_o = ctx.randn(d, d, scale=d ** -0.5, shared=True)
    return x, w_qkv, w_o, s["heads"]


def reference(x, w_qkv, w_o, heads):
    world = dist.get_world_size()
    b, sl, d = x.shape
    dh, hl = d // heads, heads // world
    qkv = (x @ w_qkv.t()).view(b, sl, 3, world, hl, dh)
    # sequence-sharded -> head-sharded: destination rank = head group
    send = qkv.permute(3, 0, 1, 2, 4, 5).contiguous()                # (ws, B, S/ws, 3, hl, Dh)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)                               # recv[src] = src's chunk, my heads
    q, k, v = recv.permute(1, 3, 4, 0, 2, 5).reshape(b, 3, hl, world * sl, dh).unbind(1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)      # (B, hl, S, Dh)
    # head-sharded -> sequence-sharded: destination rank = sequence chunk
    send = o.view(b, hl, world, sl, dh).permute(2, 0, 3, 1, 4).contiguous()   # (ws, B, S/ws, hl, Dh)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)                               # recv[src] = my chunk, src's heads
    o = recv.permute(1, 2, 0, 3, 4).reshape(b, sl, d)
    return o @ w_o.t()


def speed_of_light(size, world_size):
    b, s, h, dh = size["batch"], size["seq"], size["heads"], size["head_dim"]
    d = h * dh
    sl = s // world_size
    moved = (world_size - 1) / world_size * 4 * b * sl * d * 4        # qkv out, o back
    flops = 2 * b * sl * d * 4 * d + 4 * b * s * s * dh * (h // world_size) / 2
    return {"link_bytes_per_rank": moved, "flops": flops}
