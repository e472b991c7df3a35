"""Blockwise attention and zigzag causal ring attention shared by the ring-attention tasks."""
import torch
import torch.distributed as dist


def attn(q, k, v, causal):
    """Block attention in (B, H, S, Dh): output and log-sum-exp of the scaled scores."""
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse.unsqueeze(-1)) @ v, lse

def merge(out, lse, b_out, b_lse):
    new = torch.logaddexp(lse, b_lse)
    return out * torch.exp(lse - new).unsqueeze(-1) + b_out * torch.exp(b_lse - new).unsqueeze(-1), new

def ring_attention(q, k, v, group):
    """Zigzag causal ring attention over `group`; q, k, v (B, H, 2c, Dh) -> out (B, H, 2c, Dh)."""
    ranks = dist.get_process_group_ranks(group)
    world, me = len(ranks), dist.get_rank(group)
    nxt, prv = ranks[(me + 1) % world], ranks[(me - 1) % world]
    c = q.shape[2] // 2
    kv = torch.stack([k, v])
    out = lse = None
    for step in range(world):
        if step + 1 < world:
            incoming = torch.empty_like(kv)
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, kv, nxt, group),
                                           dist.P2POp(dist.irecv, incoming, prv, group)])
        if step == 0:
            out, lse = attn(q, kv[0], kv[1], causal=True)
        elif step <= me:
            out, lse = merge(out, lse, *attn(q, kv[0, :, :, :c], kv[1, :, :, :c], causal=False))
        else:
            o2, l2 = merge(out[:, :, c:], lse[:, :, c:], *attn(q[:, :, c:], kv[0], kv[1], causal=False))
            out, lse = torch.cat([out[:, :, :c], o2], 2), torch.cat([lse[:, :, :c], l2], 2)
        if step + 1 < world:
            for req in reqs:
                req.wait()
            kv = incoming
    return out
