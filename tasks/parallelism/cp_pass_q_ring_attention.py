"""Context-parallel prefill against a sequence-sharded KV cache with pass-Q ring attention: the query
chunks travel around the ring instead of the (much larger) cached keys and values, and the partial
outputs go back to their owners in one all-to-all where they are merged by log-sum-exp (Meta's
"Context Parallelism for Scalable Million-Token Inference", Yang et al. 2024, pass-Q variant).

For multi-turn prefill the cache of earlier turns is long and the new tokens few, so moving Q is
cheaper than moving K/V. Rank r holds positions [r*L/ws, (r+1)*L/ws) of the cache, k, v
(B, L/ws, H, Dh), and its chunk of the new tokens' queries q (B, Sq/ws, H, Dh). The new tokens attend to
the whole cache (every cached position precedes them; attention among the new tokens themselves is not
part of this task), with scale 1/sqrt(Dh):

    ring      step s = 0..ws-1: rank r holds the query chunk of rank (r - s) mod ws, computes its
              partial attention over the local cache (output normalised over the local keys, and the
              log-sum-exp of the scores), and passes the chunk on to rank r+1 (batched send/recv)
    all-to-all  the partial (out, lse) computed for rank j's queries go back to rank j
    merge     out = sum_j exp(lse_j - logsumexp_j lse_j) * out_j       per query and head

Inputs per rank: q (B, Sq/ws, H, Dh), k, v (B, L/ws, H, Dh) fp32. Output: out (B, Sq/ws, H, Dh) fp32.
Tolerance: fp32 defaults.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.parallelism._ring import attn

SLUG = "cp_pass_q_ring_attention"
ID = 87
TITLE = "Pass-Q ring attention over a sequence-sharded KV cache: queries travel, partials return by all-to-all"
CATEGORY = "parallelism"
ORIGIN = "Context Parallelism for Scalable Million-Token Inference (Meta, Yang et al. 2024): pass-Q ring prefill"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=32)  # ws divides the cache and the new tokens (32 at screen)
# full: a 128K-token cache, 8192 new tokens, Llama-3-8B-sized heads without GQA
SIZES = {"screen": {"batch": 1, "new": 32, "cached": 128, "heads": 2, "head_dim": 16},
         "full": {"batch": 1, "new": 8192, "cached": 131072, "heads": 32, "head_dim": 128}}
OUTPUTS = [Output("out", torch.float32,
                  shape=lambda s, n, r: (s["batch"], s["new"] // n, s["heads"], s["head_dim"]))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    b, h, dh = s["batch"], s["heads"], s["head_dim"]
    q = ctx.randn(b, s["new"] // n, h, dh, scale=2.0)          # scores of std 2: a peaked softmax
    k = ctx.randn(b, s["cached"] // n, h, dh)
    v = ctx.randn(b, s["cached"] // n, h, dh)
    return q, k, v


def reference(q, k, v):
    world, rank = dist.get_world_size(), dist.get_rank()
    kt, vt = k.transpose(1, 2), v.transpose(1, 2)                # (B, H, L/ws, Dh)
    partial_out = torch.empty(world, *q.shape, device=q.device)  # indexed by the queries' owner
    partial_lse = torch.empty(world, q.shape[0], q.shape[2], q.shape[1], device=q.device)
    chunk = q
    for step in range(world):
        if step + 1 < world:
            incoming = torch.empty_like(chunk)
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, chunk, (rank + 1) % world),
                                           dist.P2POp(dist.irecv, incoming, (rank - 1) % world)])
        owner = (rank - step) % world
        out, lse = attn(chunk.transpose(1, 2), kt, vt, causal=False)
        partial_out[owner], partial_lse[owner] = out.transpose(1, 2), lse
        if step + 1 < world:
            for req in reqs:
                req.wait()
            chunk = incoming
    got_out, got_lse = torch.empty_like(partial_out), torch.empty_like(partial_lse)
    dist.all_to_all_single(got_out, partial_out)
    dist.all_to_all_single(got_lse, partial_lse)
    weights = torch.softmax(got_lse, dim=0).transpose(2, 3).unsqueeze(-1)   # (ws, B, Sq/ws, H, 1)
    return (weights * got_out).sum(0)


def speed_of_light(size, world_size):
    b, sq, lk, h, dh = size["batch"], size["new"], size["cached"], size["heads"], size["head_dim"]
    q_bytes = b * sq // world_size * h * dh * 4
    moved = (world_size - 1) * q_bytes * (2 + 1 / dh)         # the query ring, then partial outputs and lse back
    return {"link_bytes_per_rank": moved, "flops": 4 * b * h * dh * sq * lk / world_size}
