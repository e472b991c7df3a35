"""Vocab-parallel embedding lookup + reduce-scatter: Megatron-LM's VocabParallelEmbedding under
sequence parallelism.

The embedding table is split by rows (vocabulary) over the tensor-parallel group; rank r owns token ids
[r*V/ws, (r+1)*V/ws). Every rank sees the same token ids, looks up the ids it owns and writes zeros for
the others; the partial embeddings are then summed across ranks. With sequence parallelism Megatron
reduce-scatters along the sequence (reduce_scatter_to_sequence_parallel_region), so each rank keeps the
embeddings of its sequence shard:

    partial[t] = table[ids[t] - r*V/ws] if rank r owns ids[t] else 0
    out        = reduce_scatter(partial, dim=0)        # rows [r*T/ws, (r+1)*T/ws)

Exactly one rank contributes a non-zero row per token, so the result is exact. A candidate may move only
the owned rows (an all-to-all) instead of reduce-scattering mostly zeros.

Inputs per rank: ids (tokens,) int64 in [0, vocab), identical on all ranks; table (vocab/ws, hidden) bf16.
Output: out (tokens/ws, hidden) bf16.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "vocab_parallel_embedding_rs"
ID = 33
TITLE = "Vocab-parallel embedding lookup + sequence-parallel reduce-scatter"
CATEGORY = "fused"
ORIGIN = "Megatron-LM VocabParallelEmbedding with sequence_parallel (reduce_scatter_to_sequence_parallel_region)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=32)
# full: Llama-3-70B embedding (128256 x 8192), 16384 tokens per TP group
SIZES = {"screen": {"tokens": 64, "vocab": 512, "hidden": 64},
         "full": {"tokens": 16384, "vocab": 128256, "hidden": 8192}}
OUTPUTS = [Output("out", torch.bfloat16, shape=lambda s, ws, r: (s["tokens"] // ws, s["hidden"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    ids = ctx.randint(0, s["vocab"], (s["tokens"],), shared=True)
    table = ctx.randn(s["vocab"] // ws, s["hidden"], dtype=torch.bfloat16)
    return ids, table


def reference(ids, table):
    ws, rank = dist.get_world_size(), dist.get_rank()
    v_local = table.shape[0]
    local = ids - rank * v_local
    mine = (local >= 0) & (local < v_local)
    partial = table[local.clamp(0, v_local - 1)] * mine[:, None].to(table.dtype)
    out = torch.empty(ids.shape[0] // ws, table.shape[1], dtype=table.dtype, device=table.device)
    dist.reduce_scatter_tensor(out, partial)
    return out


def speed_of_light(size, world_size):
    t, h = size["tokens"], size["hidden"]
    # only the rows owned here and needed elsewhere must move: (ws-1)/ws of this rank's 1/ws share
    return {"link_bytes_per_rank": (world_size - 1) / world_size ** 2 * t * h * 2, "flops": 0}
