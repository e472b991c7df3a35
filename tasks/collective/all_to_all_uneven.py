"""All-to-all with uneven, per-trial random splits: the token dispatch of expert-parallel MoE.

Each rank holds `tokens` rows (tokens x top-k routes, already permuted so that the rows bound for rank j
are contiguous and in rank order) and the split sizes the router produced: `send_splits[j]` rows go to
rank j, and `recv_splits[i]` rows arrive from rank i. The output is what this rank receives: the rows
from rank 0, then rank 1, ... (Megatron-LM's MoEAlltoAllTokenDispatcher, DeepSpeed-MoE, DeepEP's normal
mode). The split sizes are host-side lists, as in Megatron-LM, where they reach the CPU before the
exchange.

The split matrix is random per trial and clumpy (some pairs exchange nothing), with exact margins: every
rank sends `tokens` rows, and rank r receives a fixed, skewed total (about half of `tokens` on rank 0 up
to about 1.5x on the last rank, like experts of uneven popularity), so output shapes are known from the
size, the world size and the rank. Tokens are bf16, so the comparison uses bf16's tolerance.
"""
import random

import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "all_to_all_uneven"
ID = 9
TITLE = "All-to-all with uneven random splits (MoE token dispatch)"
CATEGORY = "collective"
ORIGIN = "Megatron-LM MoEAlltoAllTokenDispatcher token dispatch (torch.distributed.all_to_all_single with splits)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {"screen": {"tokens": 64, "hidden": 32},
         "full": {"tokens": 16384, "hidden": 4096}}  # full: 128 MiB of bf16 sent per rank


def recv_totals(tokens: int, world_size: int) -> list[int]:
    """Rows each rank receives: about (0.5 + r/world_size) * tokens on rank r, summing to world_size*tokens."""
    totals = [tokens * (world_size + 1 + 2 * r) // (2 * world_size) for r in range(world_size - 1)]
    return totals + [tokens * world_size - sum(totals)]


OUTPUTS = [Output("out", torch.bfloat16, shape=lambda size, world_size, rank:
                  (recv_totals(size["tokens"], world_size)[rank], size["hidden"]))]


def split_matrix(ctx) -> list[list[int]]:
    """S[i][j] = rows rank i sends to rank j; identical on every rank, random per trial.

    Row sums are `tokens`, column sums recv_totals. Each column's total is cut into random pieces (some
    empty), the pieces of all columns are shuffled into one sequence, and rank i takes the i-th stretch
    of `tokens` destinations of it.
    """
    rng = random.Random(ctx.generator(shared=True).initial_seed())
    tokens, ws = ctx.size["tokens"], ctx.world_size
    pieces = []
    for j, total in enumerate(recv_totals(tokens, ws)):
        cuts = sorted(rng.randint(0, total) for _ in range(ws - 1))
        pieces += [(j, b - a) for a, b in zip([0] + cuts, cuts + [total])]
    rng.shuffle(pieces)
    matrix = [[0] * ws for _ in range(ws)]
    sender, room = 0, tokens
    for j, count in pieces:
        while count:
            take = min(count, room)
            matrix[sender][j] += take
            count, room = count - take, room - take
            if room == 0:
                sender, room = sender + 1, tokens
    return matrix


def make_inputs(ctx):
    matrix = split_matrix(ctx)
    send_splits = matrix[ctx.rank]
    recv_splits = [matrix[i][ctx.rank] for i in range(ctx.world_size)]
    x = ctx.randn(ctx.size["tokens"], ctx.size["hidden"], dtype=torch.bfloat16)
    return x, send_splits, recv_splits


def reference(x, send_splits, recv_splits):
    out = x.new_empty((sum(recv_splits), x.shape[1]))
    dist.all_to_all_single(out, x, output_split_sizes=recv_splits, input_split_sizes=send_splits)
    return out


def speed_of_light(size, world_size):
    # the most loaded rank receives the largest total; on average 1/world_size of it comes from itself
    rows = max(size["tokens"], max(recv_totals(size["tokens"], world_size)))
    return {"link_bytes_per_rank": rows * (world_size - 1) / world_size * size["hidden"] * 2, "flops": 0}
