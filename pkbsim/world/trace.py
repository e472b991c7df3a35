"""Per-rank trace of what a program did: communication, synchronisation and compute, with call sites.

One record per operation, in issue order, as plain dicts so the trace is its own JSON schema:
  {"i", "t_us", "kind": "collective"|"p2p"|"symm"|"compute"|"stream"|"host",
   "op", "site", "stream", ... kind-specific fields (group, seq, peer, shapes, dtypes, bytes, flops,
   peer_bytes: {"read": {rank: bytes}, "write": {rank: bytes}}, event ids)}
The timing engine replays these traces; `pkb check --trace FILE` writes them.
"""
from __future__ import annotations

import json
import time
from typing import Any

import torch

from pkbsim.timing.compute import NO_KERNEL


def describe(tensors) -> tuple[list[list[int]], list[str], int]:
    shapes, dtypes, nbytes = [], [], 0
    for t in tensors:
        if isinstance(t, torch.Tensor):
            shapes.append(list(t.shape))
            dtypes.append(str(t.dtype).replace("torch.", ""))
            nbytes += t.numel() * t.element_size()
    return shapes, dtypes, nbytes


def moved_by(kind: str, op: str, fields: dict) -> int:
    """The bytes a record moves on its rank: a kernel's reads and writes, a collective's payload; nothing for
    an op that launches no kernel (an allocation records its output's bytes, but touches none)."""
    if kind == "compute" and op in NO_KERNEL:
        return 0
    return sum(int(fields.get(f) or 0) for f in ("bytes_read", "bytes_written", "bytes"))


class RankTrace:
    def __init__(self, rank: int, t0: float, enabled: bool = True):
        self.rank, self.t0, self.enabled = rank, t0, enabled
        self.records: list[dict[str, Any]] = []
        self.exit_site: str | None = None  # where the rank's program called sys.exit, if it did
        self.moved = 0                     # bytes the recorded ops moved so far (pkbsim.timing.reuse)

    def record(self, kind: str, op: str, site: str, stream: int = 0, **fields) -> dict | None:
        if not self.enabled:
            return None
        rec = {"i": len(self.records), "t_us": round((time.perf_counter() - self.t0) * 1e6, 1),
               "kind": kind, "op": op, "site": site, "stream": stream, **fields}
        self.records.append(rec)
        self.moved += moved_by(kind, op, fields)
        return rec


def trace_doc(world_size: int, traces: list[RankTrace], meta: dict) -> dict:
    """The traces as one `pkb.trace/1` document, the form the timing engine replays."""
    return records_doc(world_size, [t.records for t in traces], meta)


def records_doc(world_size: int, records: list[list[dict]], meta: dict) -> dict:
    """Per-rank record lists (rank = index) as one `pkb.trace/1` document."""
    return {"schema": "pkb.trace/1", "world_size": world_size, **meta,
            "ranks": [{"rank": r, "ops": ops} for r, ops in enumerate(records)]}


def write_trace(path: str, world_size: int, traces: list[RankTrace], meta: dict) -> None:
    with open(path, "w") as f:
        json.dump(trace_doc(world_size, traces, meta), f, indent=1)
