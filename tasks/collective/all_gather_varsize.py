"""All-gather of tensors whose row counts differ per rank (random per trial), concatenated in rank order.

Rank r holds `counts[r]` rows; every rank knows all counts (a host-side list) and returns the
concatenation of all ranks' rows, rank 0 first. This is Megatron-LM's
`gather_from_sequence_parallel_region(..., output_split_sizes=...)` (the MoE all-gather token dispatcher
and sequence parallelism with uneven shards), DeepSpeed-Ulysses' variable-length gather, and gathering
per-rank detections or samples of uneven count. NCCL's all-gather needs equal sizes; PyTorch's NCCL
backend serves an uneven `all_gather` with one broadcast per rank, which is what the reference does.

The total row count is fixed by the size (so the output shape is known) and every rank has at least one
row; the split of the total among ranks is random per trial. The collective only moves data, so the
comparison is exact.
"""
import random

import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "all_gather_varsize"
ID = 10
TITLE = "All-gather of per-rank variable row counts (all-gather-v)"
CATEGORY = "collective"
ORIGIN = "Megatron-LM gather_from_sequence_parallel_region with output_split_sizes (MoE all-gather dispatcher)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {"screen": {"rows": 24, "hidden": 32},
         "full": {"rows": 4096, "hidden": 2048}}  # full: 32 MiB of fp32 per rank on average, 256 MiB at 8 ranks
OUTPUTS = [Output("out", torch.float32, rtol=0.0, atol=0.0,  # data movement only: bit-exact
                  shape=lambda size, world_size, rank: (world_size * size["rows"], size["hidden"]))]


def row_counts(ctx) -> list[int]:
    """Every rank's row count, identical on every rank, random per trial, each >= 1, summing to ws*rows."""
    rng = random.Random(ctx.generator(shared=True).initial_seed())
    total = ctx.world_size * ctx.size["rows"]
    cuts = sorted(rng.sample(range(1, total), ctx.world_size - 1))
    return [b - a for a, b in zip([0] + cuts, cuts + [total])]


def make_inputs(ctx):
    counts = row_counts(ctx)
    return ctx.randn(counts[ctx.rank], ctx.size["hidden"]), counts


def reference(x, counts):
    out = x.new_empty((sum(counts), x.shape[1]))
    parts = out.split(counts)
    parts[dist.get_rank()].copy_(x)
    works = [dist.broadcast(part, src=j, async_op=True) for j, part in enumerate(parts)]
    for work in works:
        work.wait()
    return out


def speed_of_light(size, world_size):
    # each rank receives every other rank's rows: on average (world_size - 1) * rows of them
    return {"link_bytes_per_rank": (world_size - 1) * size["rows"] * size["hidden"] * 4, "flops": 0}
