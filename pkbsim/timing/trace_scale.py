"""A screen-size trace scaled to the task's full size, for candidates whose device kernels a full-size shape
run cannot execute (no data for Triton's or the PTX interpreter).

The rule: every byte count, FLOP count and kernel's work (loads, atomics, instructions) is multiplied by r,
the ratio of the bytes the reference moves at full size to those at screen size (the task's own measure of
how much more work full size is), and each device kernel's grid by r too (one block per fixed number of
elements, the common launch rule), rounded up, except a grid-stride kernel already looping at screen size:
one that reads its grid's size (%nctaid, tl.num_programs) and whose blocks each stored data more than once.
Its host capped the grid (`min(4, ...)`, a block per SM), so the grid stays and each thread loops r times
longer (measured on one H200: an inline-CUDA one-shot all-reduce on 4 blocks took 28.4 ms at
full size; the grid x r predicted 0.45 ms). What does not grow with data stays: flag hops and waits
(a protocol's rounds), signals, barriers, the atomics a block waits for, one-sector loads (a block's
pointers and scalars), and the updates of an atomic address that one block alone made (a flag slot per
block); an address fed by several blocks (a counter, a histogram bin) takes r times as many. A torch op's
elements grow like its bytes; the steps a thread takes in sequence and the kernels torch splits it into stay
(both depend on the full-size shapes, which a scaled trace does not have; they matter for small kernels
only).
"""
from __future__ import annotations

import copy
import math

WORK_FIELDS = ("bytes", "bytes_read", "bytes_written", "flops", "elements", "reuse_bytes")
DEVICE_FIELDS = ("local_read", "local_write", "peer_read", "load_ops", "store_ops", "atomics", "reductions", "warp_instructions")


def moved_bytes(doc: dict) -> int:
    """The bytes a trace's kernels and communication move, all ranks together."""
    return sum(int(op.get("bytes", 0)) + int(op.get("bytes_read", 0)) + int(op.get("bytes_written", 0))
               for r in doc["ranks"] for op in r["ops"])


def loops_on_a_fixed_grid(dev: dict) -> bool:
    """A grid-stride kernel whose grid the data already outgrew at screen size (the rule above). Counted in
    stores, not bytes: a thread storing one 16-byte vector has not looped."""
    return bool(dev.get("reads_grid_size")) and dev.get("store_ops", 0) > max(int(dev.get("blocks", 1)), 1)


def scale_device(dev: dict, ratio: float, grid_ratio: float) -> dict:
    """One kernel's work record at `ratio` times the data, its grid at `grid_ratio` times the blocks (kept
    for a grid-stride kernel on a grid its host fixed)."""
    if loops_on_a_fixed_grid(dev):
        grid_ratio = 1.0
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
            for f in WORK_FIELDS:
                if f in op:
                    op[f] = round(op[f] * ratio)
            if "kernels" in op:   # more rows, not longer ones: which kernels run and a row's size stay
                grows = ("read", "written", "elements", "reread", "span")
                op["kernels"] = [{f: round(v * ratio) if f in grows else v for f, v in k.items()}
                                 for k in op["kernels"]]
            peer = op.get("peer_bytes")
            if peer:
                op["peer_bytes"] = {d: {p: round(b * ratio) for p, b in m.items()} for d, m in peer.items()}
            if "device" in op:
                op["device"] = scale_device(op["device"], ratio, ratio)
    out["scaled"] = ratio
    return out
