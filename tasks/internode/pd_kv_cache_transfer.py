"""Prefill-to-decode KV-cache transfer in disaggregated LLM serving: the prefill instance computes a
request's KV cache and ships its blocks to the decode instance, which writes them into free blocks of
its own paged cache (vLLM's KV connectors over NIXL/Mooncake, DistServe, Splitwise).

Layout (node-major): rank r is on node r // G at local rank r % G, G = size["gpus_per_node"] (8 at full
size, 4 at screen size), with an even number of nodes. The first half of the nodes run prefill, the
second half decode; both instances shard attention heads over the G GPUs of a node (tensor parallel),
so prefill rank r pairs with decode rank r + world_size/2: same local rank, same KV heads, a different
node.

Each rank holds its paged KV cache, pool (layers, 2, pool_blocks, block_size, kv_heads, head_dim) bf16
(K and V per layer, as vLLM allocates it), and block_ids (blocks,) int64, distinct: on a prefill rank
the request's blocks in its pool, in token order; on a decode rank the free blocks the request gets.
Prefill ranks send pool[:, :, block_ids]; decode ranks return a copy of their pool with those blocks
written at their own block_ids. Outputs: decode ranks the updated pool, prefill ranks an empty bf16
tensor (they only send). A copy of bf16 values: bit-exact for any correct candidate (the bf16 default
tolerance is what the validator requires of bf16 outputs).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.internode._nodes import gpus_per_node

SLUG = "pd_kv_cache_transfer"
ID = 142
TITLE = "Prefill/decode disaggregation: paged KV-cache block transfer from prefill nodes to decode nodes"
CATEGORY = "internode"
ORIGIN = "Disaggregated serving KV transfer (vLLM NIXL/Mooncake connectors, DistServe, Splitwise)"
WORLD_SIZES = WorldSizes(min=16, multiple_of=16)  # an even number of 8-GPU nodes
# full: Llama-3-70B with TP 8 (80 layers, 1 KV head per GPU, head_dim 128, 16-token blocks); an 8k-token
# prompt is 512 blocks (335 MB per GPU) into a 1024-block decode pool
SIZES = {"screen": {"layers": 2, "pool_blocks": 16, "blocks": 6, "block_size": 4, "kv_heads": 1, "head_dim": 8,
                    "gpus_per_node": 4},
         "full": {"layers": 80, "pool_blocks": 1024, "blocks": 512, "block_size": 16, "kv_heads": 1,
                  "head_dim": 128, "gpus_per_node": 8}}


def _pool_shape(s):
    return (s["layers"], 2, s["pool_blocks"], s["block_size"], s["kv_heads"], s["head_dim"])


OUTPUTS = [Output("decode_pool", torch.bfloat16, shape=lambda s, ws, r: _pool_shape(s) if r >= ws // 2 else (0,))]


def make_inputs(ctx):
    s = ctx.size
    gpus_per_node(s, ctx.world_size)  # the world must be whole nodes (WORLD_SIZES makes their number even)
    pool = ctx.randn(*_pool_shape(s), dtype=torch.bfloat16)
    return pool, ctx.randperm(s["pool_blocks"])[: s["blocks"]]


def reference(pool, block_ids):
    half, rank = dist.get_world_size() // 2, dist.get_rank()
    if rank < half:
        dist.send(pool[:, :, block_ids].contiguous(), dst=rank + half)
        return pool.new_empty(0)
    blocks = pool.new_empty(pool.shape[0], 2, block_ids.numel(), *pool.shape[3:])
    dist.recv(blocks, src=rank - half)
    out = pool.clone()
    out[:, :, block_ids] = blocks
    return out


def speed_of_light(size, world_size):
    s = size
    network = s["layers"] * 2 * s["blocks"] * s["block_size"] * s["kv_heads"] * s["head_dim"] * 2
    return {"link_bytes_per_rank": network, "network_bytes_per_rank": network, "flops": 0}
