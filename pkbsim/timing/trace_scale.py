"""A screen-size trace scaled to the task's full size, for candidates whose device kernels a full-size shape
run cannot execute (no data for Triton's or the PTX interpreter).

The rule: every byte count, FLOP count and kernel's work (loads, atomics, instructions) is multiplied by r,
the ratio of the bytes the reference moves at full size to those at screen size (the task's own measure of
how much more work full size is), and each device kernel's grid by r too (one block per fixed number of
elements, the common launch rule), rounded up. What does not grow with data stays: flag hops and waits
(a protocol's rounds), signals, barriers, and the updates of an atomic address that one block alone made
(a flag slot per block); an address fed by several blocks (a counter, a histogram bin) takes r times as many.
"""
from __future__ import annotations

import copy
import math

BYTE_FIELDS = ("bytes", "bytes_read", "bytes_written", "flops")
DEVICE_FIELDS = ("local_read", "local_write", "peer_read", "load_ops", "atomics", "reductions", "warp_instructions")


def moved_bytes(doc: dict) -> int:
    """The bytes a trace's kernels and communication move, all ranks together."""
    return sum(int(op.get("bytes", 0)) + int(op.get("bytes_read", 0)) + int(op.get("bytes_written", 0))
               for r in doc["ranks"] for op in r["ops"])


def scale_device(dev: dict, ratio: float, grid_ratio: float) -> dict:
    """One kernel's work record at `ratio` times the data, its grid at `grid_ratio` times the blocks."""
    out = dict(dev)
    for f in DEVICE_FIELDS:
        if f in out:
            out[f] = round(out[f] * ratio)
    for hot in ("atomic_hot", "reduction_hot"):
        if out.get(f"{hot}_shared"):   # fed by several blocks' data (a counter, a bin): grows with it
            out[hot] = round(out[hot] * ratio)
    out["blocks"] = max(1, math.ceil(out.get("blocks", 1) * grid_ratio))
    return out


def scale_trace(doc: dict, ratio: float) -> dict:
    """A copy of `doc` with the rule above applied to every op."""
    out = copy.deepcopy(doc)
    for r in out["ranks"]:
        for op in r["ops"]:
            for f in BYTE_FIELDS:
                if f in op:
                    op[f] = round(op[f] * ratio)
            peer = op.get("peer_bytes")
            if peer:
                op["peer_bytes"] = {d: {p: round(b * ratio) for p, b in m.items()} for d, m in peer.items()}
            if "device" in op:
                op["device"] = scale_device(op["device"], ratio, ratio)
    out["scaled"] = ratio
    return out
