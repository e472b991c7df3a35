"""Decode attention over a KV cache sharded along the sequence, combined by log-sum-exp: vLLM's decode
context parallelism (DCP, cp_lse_ag_out_rs) / flash-decoding split across GPUs.

For long-context decoding vLLM can shard each request's KV cache over the ranks of a group (every rank
stores 1/ws of the tokens). All ranks hold the same query heads; each computes attention of all query
heads over its local KV tokens, yielding a partial output normalised over its tokens and its
log-sum-exp. The partial results are combined exactly: the LSEs are all-gathered, each partial output is
rescaled, and the rescaled outputs are reduce-scattered over the heads so that rank r ends with heads
[r*Hq/ws, (r+1)*Hq/ws) (cp_lse_ag_out_rs):

    s_j   = q . k_j / sqrt(D)     (grouped-query: query head h uses KV head h // (Hq / Hkv))
    o     = sum_j softmax_local(s)_j v_j,    lse = logsumexp_local(s)           # per rank, fp32
    LSE   = logsumexp over ranks of lse                                          # all-gather
    out   = reduce_scatter_heads(o * exp(lse - LSE))                             # fp32 sum, bf16 result

Inputs per rank: q (batch, Hq, D) bf16, identical on all ranks; k_cache, v_cache (batch, ctx/ws, Hkv, D)
bf16, this rank's share of each request's context. The queries are scaled so that attention is peaked,
as in trained models.
Output: out (batch, Hq/ws, D) bf16.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "decode_cp_attention_lse_combine"
ID = 39
TITLE = "Decode attention with a sequence-sharded KV cache + LSE combine (reduce-scatter over heads)"
CATEGORY = "fused"
ORIGIN = "vLLM decode context parallelism (DCP) cp_lse_ag_out_rs; flash-decoding split-KV across GPUs"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=8)
# full: 64 requests with 32k-token contexts, Llama-3-70B-like attention per rank (64 query / 8 KV heads)
SIZES = {"screen": {"batch": 4, "ctx": 128, "q_heads": 8, "kv_heads": 2, "head_dim": 16},
         "full": {"batch": 64, "ctx": 32768, "q_heads": 64, "kv_heads": 8, "head_dim": 128}}
OUTPUTS = [Output("out", torch.bfloat16,
                  shape=lambda s, ws, r: (s["batch"], s["q_heads"] // ws, s["head_dim"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    b, d = s["batch"], s["head_dim"]
    q = ctx.randn(b, s["q_heads"], d, dtype=torch.bfloat16, scale=3.0, shared=True)
    k = ctx.randn(b, s["ctx"] // ws, s["kv_heads"], d, dtype=torch.bfloat16)
    v = ctx.randn(b, s["ctx"] // ws, s["kv_heads"], d, dtype=torch.bfloat16)
    return q, k, v


def reference(q, k_cache, v_cache):
    ws = dist.get_world_size()
    b, hq, d = q.shape
    hkv = k_cache.shape[2]
    qf = q.float().view(b, hkv, hq // hkv, d)
    scores = torch.einsum("bhgd,blhd->bhgl", qf, k_cache.float()) * d ** -0.5
    lse = scores.logsumexp(-1)                                         # (b, hkv, g)
    o = torch.einsum("bhgl,blhd->bhgd", (scores - lse[..., None]).exp(), v_cache.float())
    lses = torch.empty(ws, *lse.shape, dtype=lse.dtype, device=lse.device)
    dist.all_gather_into_tensor(lses, lse.contiguous())
    o = o * (lse - lses.logsumexp(0))[..., None].exp()
    parts = o.reshape(b, ws, hq // ws, d).transpose(0, 1).contiguous()  # (ws, b, hq/ws, d)
    out = torch.empty(b, hq // ws, d, dtype=o.dtype, device=o.device)
    dist.reduce_scatter_tensor(out, parts)
    return out.to(q.dtype)


def speed_of_light(size, world_size):
    b, n, hq, d = size["batch"], size["ctx"], size["q_heads"], size["head_dim"]
    frac = (world_size - 1) / world_size
    return {"link_bytes_per_rank": frac * (b * hq * 4 + b * hq * d * 4),
            "flops": 4 * b * hq * (n / world_size) * d}  # per rank
