"""Causal ring attention backward (context parallelism): K/V blocks travel around the ring again and their
gradient accumulators travel one step behind them, so that every rank ends with dK, dV of its own
block (Liu et al., "Ring Attention with Blockwise Transformers"; the zigzag backward of
ring-flash-attention / Megatron-LM context parallelism).

Layout as in the forward: the global sequence (length S) is cut into 2*ws chunks of length c; rank r
holds chunks r and 2*ws-1-r, concatenated: dout, q, k, v, out of shape (B, 2c, H, Dh) and lse (B, H, 2c).
out and lse are the exact forward results of causal attention over the global sequence (scale
1/sqrt(Dh)) for the local queries, as the forward saved them. The backward:

    delta = rowsum(dout * out)                               (per query and head)
    for every (query block, K/V block) pair causality needs, with P = exp(q k^T * scale - lse):
        dV += P^T dout,  dS = P * (dout v^T - delta),  dQ += dS k * scale,  dK += dS^T q * scale
    step 0      the local K/V, causally
    step s > 0  the K/V of rank (r - s) mod ws: if that rank is lower (s <= r), all local queries with
                its first chunk; otherwise the local second chunk with both of its chunks
    rings       K/V go to rank r+1 (received from r-1) while a step computes; the dK/dV accumulator of
                the block a rank holds is received from r-1, the step's contribution added, and sent to
                r+1; after the last step it arrives at the block's owner

Returns dq, dk, dv, each (B, 2c, H, Dh).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "ring_attention_backward"
ID = 62
TITLE = "Causal ring attention backward with zigzag sharding: K/V ring plus a dK/dV accumulator ring"
CATEGORY = "parallelism"
ORIGIN = "Ring Attention (Liu et al. 2023) backward; zigzag_ring_flash_attn_backward of ring-flash-attention"
WORLD_SIZES = WorldSizes(min=2, max=16, power_of_two=True)  # 2*ws must divide the sequence
SIZES = {
    "screen": {"batch": 1, "seq": 64, "heads": 2, "head_dim": 16},
    "full": {"batch": 1, "seq": 16384, "heads": 16, "head_dim": 128},
}


def _qkv_shape(s, n, r):
    return (s["batch"], s["seq"] // n, s["heads"], s["head_dim"])


OUTPUTS = [Output("dq", torch.float32, shape=_qkv_shape), Output("dk", torch.float32, shape=_qkv_shape),
           Output("dv", torch.float32, shape=_qkv_shape)]


def make_inputs(ctx):
    s = ctx.size
    n, r = ctx.world_size, ctx.rank
    b, seq, h, dh = s["batch"], s["seq"], s["heads"], s["head_dim"]
    c = seq // (2 * n)
    pos = torch.cat([torch.arange(r * c, (r + 1) * c), torch.arange((2 * n - 1 - r) * c, (2 * n - r) * c)])
    k_all = ctx.randn(b, seq, h, dh, shared=True)            # the global K, V (for out and lse only)
    v_all = ctx.randn(b, seq, h, dh, shared=True)
    q = ctx.randn(b, 2 * c, h, dh, scale=2.0)               # scores of std 2: a peaked softmax
    dout = ctx.randn(b, 2 * c, h, dh)
    k, v = k_all[:, pos.to(k_all.device)], v_all[:, pos.to(v_all.device)]
    # the forward's saved results: causal attention of the local queries over the global sequence
    scores = (q.transpose(1, 2) @ k_all.permute(0, 2, 3, 1)) * dh ** -0.5          # (B, H, 2c, S)
    masked = pos.to(q.device).unsqueeze(1) < torch.arange(seq, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(masked, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    out = (torch.softmax(scores, dim=-1) @ v_all.transpose(1, 2)).transpose(1, 2).contiguous()
    return dout, q, k.contiguous(), v.contiguous(), out, lse


def _attn_backward(dout, q, k, v, delta, lse, causal):
    """Gradients of one (query block, K/V block) pair, in (B, H, S, Dh)."""
    scale = q.shape[-1] ** -0.5
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    p = torch.exp(s - lse.unsqueeze(-1))
    dv = p.transpose(-1, -2) @ dout
    ds = p * (dout @ v.transpose(-1, -2) - delta.unsqueeze(-1))
    return (ds @ k) * scale, (ds.transpose(-1, -2) @ q) * scale, dv


def reference(dout, q, k, v, out, lse):
    world, rank = dist.get_world_size(), dist.get_rank()
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    c = q.shape[1] // 2
    qt, dot = q.transpose(1, 2), dout.transpose(1, 2)                 # (B, H, 2c, Dh)
    delta = (dout * out).sum(-1).transpose(1, 2)                      # (B, H, 2c)
    kv = torch.stack([k.transpose(1, 2), v.transpose(1, 2)])          # the block that travels
    dq = torch.zeros_like(qt)
    dkv = dkv_reqs = dkv_in = None
    for step in range(world):
        if step + 1 < world:
            incoming = torch.empty_like(kv)
            kv_reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, kv, nxt), dist.P2POp(dist.irecv, incoming, prv)])
        if step == 0:
            g_q, g_k, g_v = _attn_backward(dot, qt, kv[0], kv[1], delta, lse, causal=True)
            dq += g_q
            dkv = torch.stack([g_k, g_v])
        else:
            for req in dkv_reqs:                                      # the accumulator of the block we hold
                req.wait()
            dkv = dkv_in
            if step <= rank:                                          # a lower rank's block: its first chunk
                g_q, g_k, g_v = _attn_backward(dot, qt, kv[0, :, :, :c], kv[1, :, :, :c], delta, lse, False)
                dq += g_q
                dkv[0, :, :, :c] += g_k
                dkv[1, :, :, :c] += g_v
            else:                                                     # a higher rank's: local second chunk
                g_q, g_k, g_v = _attn_backward(dot[:, :, c:], qt[:, :, c:], kv[0], kv[1], delta[:, :, c:],
                                               lse[:, :, c:], False)
                dq[:, :, c:] += g_q
                dkv[0] += g_k
                dkv[1] += g_v
        if step + 1 < world:
            for req in kv_reqs:
                req.wait()
            kv = incoming
        dkv_in = torch.empty_like(dkv)
        dkv_reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, dkv, nxt), dist.P2POp(dist.irecv, dkv_in, prv)])
    for req in dkv_reqs:
        req.wait()
    return dq.transpose(1, 2).contiguous(), dkv_in[0].transpose(1, 2).contiguous(), \
        dkv_in[1].transpose(1, 2).contiguous()


def speed_of_light(size, world_size):
    b, s, h, dh = size["batch"], size["seq"], size["heads"], size["head_dim"]
    sl = s // world_size
    # K/V ring (ws-1 hops) and dK/dV ring (ws hops); backward ~2.5x the forward's matmul work
    return {"link_bytes_per_rank": (2 * world_size - 1) * 2 * b * sl * h * dh * 4,
            "flops": 2.5 * 4 * b * h * dh * s * s / 2 / world_size}
