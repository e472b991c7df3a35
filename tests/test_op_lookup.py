"""Rank threads looking up the same torch op at once get one object (pkbsim/world/op_lookup.py). The buggy
twin is torch's own lookup: two threads that overlap in it build two objects, and the one replaced is
freed while C++ may keep a pointer to it (ParallelKernelBench 62's reference crashed so under 8 ranks)."""
from __future__ import annotations

import threading
import time

import torch
import torch._ops

from pkbsim.world.op_lookup import serialised

def _torchs_lookup():
    """OpOverloadPacket.__getattr__ as torch defines it (another test's world may have serialised it)."""
    fn = torch._ops.OpOverloadPacket.__dict__["__getattr__"]
    return getattr(fn, "__wrapped__", fn)


def _lookups_at_once(monkeypatch, getattr_fn, threads: int = 4) -> tuple[set[int], object, list]:
    """ids of the objects `threads` threads got for a fresh lookup of one overload, the one the packet
    kept, and the objects themselves."""
    slow_init = torch._ops.OpOverload.__init__

    def init(self, *a, **k):   # widen the window, as a GIL switch inside the lookup does
        time.sleep(0.05)
        slow_init(self, *a, **k)
    monkeypatch.setattr(torch._ops.OpOverload, "__init__", init)
    monkeypatch.setattr(torch._ops.OpOverloadPacket, "__getattr__", getattr_fn)
    packet = torch.ops.aten._test_string_default   # an op no test dispatches: its object may be dropped
    packet.__dict__.pop("default", None)
    go, got = threading.Barrier(threads), []

    def look():
        go.wait()
        got.append(packet.default)
    ts = [threading.Thread(target=look) for _ in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return {id(o) for o in got}, packet.__dict__["default"], got


def test_overlapping_lookups_build_one_object(monkeypatch):
    ids, kept, got = _lookups_at_once(monkeypatch, serialised(_torchs_lookup()))
    assert len(ids) == 1 and got[0] is kept


def test_torchs_own_lookup_builds_one_object_per_overlapping_thread(monkeypatch):
    ids, kept, got = _lookups_at_once(monkeypatch, _torchs_lookup())
    assert len(ids) > 1 and any(o is not kept for o in got)   # the replaced ones: what C++ may have cached
