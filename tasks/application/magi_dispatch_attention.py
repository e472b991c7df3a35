"""Context-parallel attention with a load-balancing token dispatch, as MagiAttention does: tokens are
shuffled across ranks (all-to-all) so that every rank gets an equal share of the causal mask's work,
attention runs in the shuffled layout, and the outputs are shuffled back (undispatch).

The global sequence of S tokens packs several documents (doc_ids (S,) int64, non-decreasing, the same on
every rank); the mask is causal within each document (varlen / document masking). Rank r holds the
contiguous tokens [r*L, (r+1)*L), L = S/ws: q, k, v (B, L, H, Dh) fp32. The reference:

  1. dispatch: the sequence is cut into 2*ws chunks of L/2 tokens; chunk j goes to rank j if j < ws and
     to rank 2*ws-1-j otherwise (the zigzag assignment that balances a causal mask), so rank r gets
     chunks r and 2*ws-1-r (all-to-all of q, k, v with uneven splits);
  2. all-gathers the dispatched k and v;
  3. attends from its dispatched queries to every key allowed by the mask (key position <= query
     position, same document), softmax scale 1/sqrt(Dh);
  4. undispatch: sends each output chunk back to the rank that held it originally (all-to-all).

Output: o (B, L, H, Dh) fp32 for the rank's original tokens, i.e. document-causal attention over the
whole sequence. Tolerance: fp32 defaults (softmax-weighted sums of O(1) values).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "magi_dispatch_attention"
ID = 130
TITLE = "MagiAttention-style dispatch: zigzag token all-to-all, document-causal attention, undispatch"
CATEGORY = "application"
ORIGIN = "MagiAttention (SandAI) dispatch / undispatch with load-balanced chunk assignment, varlen masks"
WORLD_SIZES = WorldSizes(min=2)
# full: 16K tokens of packed documents over 8 GPUs, 16 heads of 128
SIZES = {"screen": {"batch": 1, "tokens": 16, "heads": 2, "head_dim": 16, "docs": 5},
         "full": {"batch": 1, "tokens": 2048, "heads": 16, "head_dim": 128, "docs": 24}}
OUTPUTS = [Output("o", torch.float32,
                  shape=lambda s, ws, r: (s["batch"], s["tokens"], s["heads"], s["head_dim"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    shape = (s["batch"], s["tokens"], s["heads"], s["head_dim"])
    total = ws * s["tokens"]
    starts = torch.zeros(total, dtype=torch.int64, device=ctx.device)
    starts[ctx.randint(1, total, (s["docs"] - 1,), shared=True)] = 1   # document starts (may coincide)
    # q at scale 2: scores of std 2, a realistically peaked softmax
    return ctx.randn(*shape, scale=2.0), ctx.randn(*shape), ctx.randn(*shape), starts.cumsum(0)


def _move_chunks(x, held, holder, owner):
    """Send the chunks this rank holds (x: token-major, chunks `held` in ascending order) to their owners;
    return the chunks this rank owns, in ascending chunk order."""
    world, rank = dist.get_world_size(), dist.get_rank()
    c = x.shape[0] // len(held)
    chunk = {j: x[i * c:(i + 1) * c] for i, j in enumerate(held)}
    outgoing = sorted(held, key=lambda j: (owner(j), j))
    mine = sorted((j for j in range(2 * world) if owner(j) == rank), key=lambda j: (holder(j), j))
    send_splits = [c * sum(owner(j) == d for j in held) for d in range(world)]
    recv_splits = [c * sum(holder(j) == src for j in mine) for src in range(world)]
    out = x.new_empty(len(mine) * c, *x.shape[1:])
    dist.all_to_all_single(out, torch.cat([chunk[j] for j in outgoing]), recv_splits, send_splits)
    arrived = {j: out[i * c:(i + 1) * c] for i, j in enumerate(mine)}
    return torch.cat([arrived[j] for j in sorted(mine)])


def reference(q, k, v, doc_ids):
    world, rank = dist.get_world_size(), dist.get_rank()
    c = q.shape[1] // 2
    zigzag = lambda j: j if j < world else 2 * world - 1 - j  # noqa: E731
    contiguous = lambda j: j // 2  # noqa: E731
    qkv = torch.stack([q, k, v]).permute(2, 0, 1, 3, 4).contiguous()       # (L, 3, B, H, Dh)
    local = _move_chunks(qkv, [2 * rank, 2 * rank + 1], contiguous, zigzag)
    qd, kd, vd = local.permute(1, 2, 3, 0, 4)                               # (B, H, 2c, Dh) each
    kv = torch.stack([kd, vd])
    every = kv.new_empty(world, *kv.shape)
    dist.all_gather_into_tensor(every, kv.contiguous())
    chunk_pos = lambda j: torch.arange(j * c, (j + 1) * c, device=q.device)  # noqa: E731
    pos_of = lambda r: torch.cat([chunk_pos(r), chunk_pos(2 * world - 1 - r)])  # noqa: E731
    q_pos = pos_of(rank)
    k_pos = torch.cat([pos_of(r) for r in range(world)])
    mask = (k_pos[None, :] <= q_pos[:, None]) & (doc_ids[k_pos][None, :] == doc_ids[q_pos][:, None])
    keys = every[:, 0].permute(1, 2, 0, 3, 4).flatten(2, 3)                 # (B, H, ws*2c, Dh)
    values = every[:, 1].permute(1, 2, 0, 3, 4).flatten(2, 3)
    out = F.scaled_dot_product_attention(qd, keys, values, attn_mask=mask)  # (B, H, 2c, Dh)
    back = _move_chunks(out.permute(2, 0, 1, 3).contiguous(), [rank, 2 * world - 1 - rank], zigzag, contiguous)
    return back.permute(1, 0, 2, 3).contiguous()


def speed_of_light(size, world_size):
    b, n, h, d = size["batch"], size["tokens"], size["heads"], size["head_dim"]
    s = n * world_size
    # dispatch q, k, v and undispatch o (at most all L tokens each), all-gather k and v
    return {"link_bytes_per_rank": (4 * n + 2 * (world_size - 1) * n) * b * h * d * 4,
            "flops": 4 * b * h * d * s * s / 2 / world_size}
