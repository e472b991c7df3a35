"""Causal ring attention forward (context parallelism): K/V blocks travel around a ring of ranks while each
rank accumulates attention for its own queries with an online softmax (Liu et al., "Ring Attention with
Blockwise Transformers"), with the load-balanced zigzag sharding used by ring-flash-attention and
Megatron-LM context parallelism.

The global sequence of length S is cut into 2*ws chunks of length c = S / (2*ws); rank r holds chunks r
and 2*ws-1-r, concatenated: q, k, v of shape (B, 2c, H, Dh) (flash-attention layout). The output is
causal attention over global positions with scale 1/sqrt(Dh):

    step 0      attend to the local K/V causally (the two local chunks in position order)
    step s > 0  the K/V block of rank (r - s) mod ws has arrived: if that rank is lower (s <= r), all
                local queries attend to its first chunk only; otherwise only the local second chunk
                attends, to both of its chunks (no masked block is ever computed)
    merge       out, lse are combined with the block results by log-sum-exp weighting
    ring        the K/V block is sent to rank r+1 and the next one received from rank r-1 while the
                current block is computed (batch_isend_irecv)

Returns out (B, 2c, H, Dh) and lse (B, H, 2c), the log-sum-exp of the scaled scores of every query
(what flash-attention returns for the backward pass).
"""

import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.parallelism._ring import attn, merge

SLUG = "ring_attention_causal"
ID = 59
TITLE = "Causal ring attention forward with zigzag load balancing: K/V ring, online-softmax merge"
CATEGORY = "parallelism"
ORIGIN = "Ring Attention (Liu et al. 2023); zigzag causal sharding of ring-flash-attention / Megatron-LM CP"
WORLD_SIZES = WorldSizes(min=2, max=16, power_of_two=True)  # 2*ws must divide the sequence
SIZES = {
    "screen": {"batch": 1, "seq": 64, "heads": 2, "head_dim": 16},
    "full": {"batch": 1, "seq": 16384, "heads": 16, "head_dim": 128},
}
OUTPUTS = [
    Output("out", torch.float32, shape=lambda s, n, r: (s["batch"], s["seq"] // n, s["heads"], s["head_dim"])),
    Output("lse", torch.float32, shape=lambda s, n, r: (s["batch"], s["heads"], s["seq"] // n)),
]


def make_inputs(ctx):
    s = ctx.size
    shape = (s["batch"], s["seq"] // ctx.world_size, s["heads"], s["head_dim"])
    # chunks r and 2*ws-1-r; q at scale 2 gives scores of std 2, a realistically peaked softmax
    return ctx.randn(*shape, scale=2.0), ctx.randn(*shape), ctx.randn(*shape)


def reference(q, k, v):
    world, rank = dist.get_world_size(), dist.get_rank()
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    c = q.shape[1] // 2
    qt = q.transpose(1, 2)                                   # (B, H, 2c, Dh)
    kv = torch.stack([k, v])                                  # the block that travels
    out = lse = None
    for step in range(world):
        if step + 1 < world:
            incoming = torch.empty_like(kv)
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, kv, nxt), dist.P2POp(dist.irecv, incoming, prv)])
        kt, vt = kv[0].transpose(1, 2), kv[1].transpose(1, 2)
        if step == 0:
            out, lse = attn(qt, kt, vt, causal=True)
        elif step <= rank:                                    # from a lower rank: its first chunk only
            out, lse = merge(out, lse, *attn(qt, kt[:, :, :c], vt[:, :, :c], causal=False))
        else:                                                 # from a higher rank: second local chunk only
            o2, l2 = merge(out[:, :, c:], lse[:, :, c:], *attn(qt[:, :, c:], kt, vt, causal=False))
            out, lse = torch.cat([out[:, :, :c], o2], 2), torch.cat([lse[:, :, :c], l2], 2)
        if step + 1 < world:
            for req in reqs:
                req.wait()
            kv = incoming
    return out.transpose(1, 2).contiguous(), lse


def speed_of_light(size, world_size):
    b, s, h, dh = size["batch"], size["seq"], size["heads"], size["head_dim"]
    sl = s // world_size
    return {"link_bytes_per_rank": (world_size - 1) * 2 * b * sl * h * dh * 4,
            "flops": 4 * b * h * dh * s * s / 2 / world_size}
