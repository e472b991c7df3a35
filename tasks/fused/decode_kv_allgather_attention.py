"""KV-cache all-gather + decode attention for a sequence-sharded KV cache: the all-gather variant of
context-parallel decoding (Megatron-LM / TransformerEngine cp_comm_type="all_gather" applied to one new
token; the gather-the-cache baseline that vLLM's decode context parallelism improves on).

A long-context request's KV cache is split along the sequence over the ranks: rank r stores the keys and
values of positions [r*L/ws, (r+1)*L/ws). A decode step produces one new token per sequence, with its
query (all H query heads) and its key/value (Hkv heads, grouped-query attention, query head h uses K/V
head h // (H/Hkv)), identical on every rank. Every rank gathers the whole cache and attends:

    K, V  = all_gather(k_cache, v_cache) along the sequence, rank order; then the new token appended
    out   = softmax(q K^T / sqrt(Dh)) V        one query position per sequence, no mask

Inputs per rank: q (B, H, Dh) bf16, k_new, v_new (B, Hkv, Dh) bf16 (replicated); k_cache, v_cache
(B, L/ws, Hkv, Dh) bf16, this rank's positions. Output: out (B, H, Dh) bf16, identical on all ranks.
Tolerance: bf16 defaults (attention kernels accumulate in fp32 but order the sums differently; the
output is a convex combination of O(1) values).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "decode_kv_allgather_attention"
ID = 70
TITLE = "Decode attention over a sequence-sharded KV cache: all-gather K/V, GQA attention for one new token"
CATEGORY = "fused"
ORIGIN = "Context-parallel decoding with K/V all-gather (Megatron-LM/TransformerEngine cp_comm_type='all_gather')"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=64)  # ws divides the cached length
# full: Llama-3-70B attention (64 query heads, 8 KV heads of 128), 8 sequences with 32768 cached tokens
SIZES = {"screen": {"batch": 2, "cached": 64, "heads": 8, "kv_heads": 2, "head_dim": 16},
         "full": {"batch": 8, "cached": 32768, "heads": 64, "kv_heads": 8, "head_dim": 128}}
OUTPUTS = [Output("out", torch.bfloat16, shape=lambda s, n, r: (s["batch"], s["heads"], s["head_dim"]))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    b, h, hkv, dh = s["batch"], s["heads"], s["kv_heads"], s["head_dim"]
    # q at scale 2 gives scores of std 2: a peaked, realistic softmax over the cache
    q = ctx.randn(b, h, dh, dtype=torch.bfloat16, scale=2.0, shared=True)
    k_new = ctx.randn(b, hkv, dh, dtype=torch.bfloat16, shared=True)
    v_new = ctx.randn(b, hkv, dh, dtype=torch.bfloat16, shared=True)
    k_cache = ctx.randn(b, s["cached"] // n, hkv, dh, dtype=torch.bfloat16)
    v_cache = ctx.randn(b, s["cached"] // n, hkv, dh, dtype=torch.bfloat16)
    return q, k_new, v_new, k_cache, v_cache


def reference(q, k_new, v_new, k_cache, v_cache):
    world = dist.get_world_size()
    b, lc, hkv, dh = k_cache.shape
    kv = torch.stack([k_cache, v_cache], 1)                          # (B, 2, L/ws, Hkv, Dh)
    gathered = kv.new_empty(world, *kv.shape)
    dist.all_gather_into_tensor(gathered, kv)
    k, v = gathered.permute(1, 2, 0, 3, 4, 5).reshape(b, 2, world * lc, hkv, dh).unbind(1)
    k = torch.cat([k, k_new[:, None]], 1).transpose(1, 2)            # (B, Hkv, L+1, Dh)
    v = torch.cat([v, v_new[:, None]], 1).transpose(1, 2)
    return F.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)[:, :, 0]


def speed_of_light(size, world_size):
    b, length, h, hkv, dh = size["batch"], size["cached"], size["heads"], size["kv_heads"], size["head_dim"]
    cache = 2 * b * length * hkv * dh * 2
    return {"link_bytes_per_rank": (world_size - 1) / world_size * cache, "flops": 4 * b * h * length * dh}
