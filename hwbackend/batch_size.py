"""How many calls a timed batch holds, when the scorer is left to choose (`pkb score` without `--calls`).

A batch is timed as one region: its calls run back to back on fresh inputs, and the clock stops after a
sync of every stream of the device (worker.py). What it costs that is not the candidate's work (the sync's
round trip, the barrier, the messages: about 1.5 ms on an H100) is paid once per batch, so a batch must be
long against it: BATCH_S of calls makes it a small share. A batch's inputs together span at least
three times the L2 cache where memory allows, so that each call reads inputs that are not in the cache (as
ParallelKernelBench's harness does with its input groups, but every call with inputs of its own: identical
bytes would let a candidate that caches answers look fast). The sizes come from the reference's warm-up
batch, a process no candidate ran in; the candidate's batches have the same count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# seconds of calls per batch, by backend. On an H100 a batch's overhead outside its timed region was 1.5 ms (its
# jitter 0.1-0.3 ms); the clock check tolerates the jitter twice and 0.5% of the batch, so 0.1 s keeps that
# near 1%, where 28 ms batches left 1.7-3.1% (benchmarks/results/score_resolution/run3_h100)
BATCH_S = {"nccl": 0.1, "gloo": 0.05}
MIN_CALLS = 4
MAX_CALLS = 8192             # host memory for the seeds and the staged inputs' Python objects stays small
L2_SPAN = 3                  # a batch's inputs cover at least this many L2 caches (when memory allows)
MEMORY_SHARE = 0.25          # of the device memory free after the warm-up: a batch's inputs and outputs
# the same under CUDA graphs (`pkb score --graphs`): a replayed call takes only its device time, so memory is what
# bounds a batch's length (all-reduce of 2 MiB at one rank: about 5 us a call), and a batch too short for the
# clock check's tolerance (2 x the harness's 0.25-0.45 ms jitter per batch on an H100) widens the margin; a
# capture that runs out of memory is timed again eagerly, never the candidate's fault
GRAPH_MEMORY_SHARE = 0.5


@dataclass(frozen=True)
class WarmupReport:
    """What one rank's warm-up batch showed: seconds per call (the batch's time over its calls), the bytes of
    one call's inputs and of its outputs, the device memory free after it and the device's L2 cache (0 and
    None on the CPU)."""
    per_call_s: float
    input_bytes: int
    output_bytes: int
    free_bytes: int | None = None
    l2_bytes: int = 0

    @classmethod
    def from_reply(cls, reply: dict) -> WarmupReport:
        return cls(float(reply["per_call_s"]), int(reply["input_bytes"]), int(reply["output_bytes"]),
                   reply.get("free_bytes"), int(reply.get("l2_bytes") or 0))


def calls_per_batch(reports: list[WarmupReport], backend: str, graphs: bool = False) -> int:
    """The calls of one batch, from every rank's warm-up report: the slowest rank's time per call, the largest
    call's bytes, the least free memory (none: no warm-up ran, the fewest calls); `graphs`: of a batch captured
    in a CUDA graph (GRAPH_MEMORY_SHARE)."""
    if not reports:
        return MIN_CALLS
    per_call = max(max(r.per_call_s for r in reports), 1e-7)
    inputs = max(r.input_bytes for r in reports)
    footprint = inputs + max(r.output_bytes for r in reports)
    n = max(MIN_CALLS, math.ceil(BATCH_S.get(backend, max(BATCH_S.values())) / per_call))
    l2 = max(r.l2_bytes for r in reports)
    if l2 and inputs:
        n = max(n, math.ceil(L2_SPAN * l2 / inputs))
    free = [r.free_bytes for r in reports if r.free_bytes is not None]
    if free and footprint:
        n = min(n, max(1, int((GRAPH_MEMORY_SHARE if graphs else MEMORY_SHARE) * min(free) // footprint)))
    return max(1, min(n, MAX_CALLS))
