"""Warp-level instructions: shuffles, votes, redux, activemask, warp barriers.

Lanes are viewed as rows of 32 (one row per warp). A source lane that is inactive or outside the
member mask yields its stale register value, as on hardware (the result is undefined there).
"""
from __future__ import annotations

import numpy as np

from .registry import builds

_BITS = (np.uint64(1) << np.arange(32, dtype=np.uint64))


def _ballot(bits: np.ndarray) -> np.ndarray:
    """bool (lanes,) -> uint32 per lane: the ballot of its warp."""
    words = (bits.reshape(-1, 32).astype(np.uint64) * _BITS).sum(axis=1).astype(np.uint32)
    return np.repeat(words, 32)


def _active(g, m):
    return g.alive if m is None else m


@builds("shfl")
def shfl(ins, ctx):
    mode = ins.parts[2] if ins.parts[1] == "sync" else ins.parts[1]
    dests = ins.operands[0].split("|")
    wd = ctx.write(dests[0], "b32")
    wp = ctx.write(dests[1], "pred") if len(dests) > 1 else None
    a, b, c = (ctx.read(o, "u32") for o in ins.operands[1:4])

    def run(g, m):
        lane = g.special("%laneid").astype(np.int64)
        bv = np.broadcast_to(b(g), lane.shape).astype(np.int64)
        cv = np.broadcast_to(c(g), lane.shape).astype(np.int64)
        seg = (cv >> 8) & 31
        clamp = cv & 31
        min_lane = lane & seg
        max_lane = min_lane | (clamp & ~seg)
        if mode == "up":
            j = lane - bv
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bv
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= max_lane
        else:
            j = min_lane | (bv & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = (np.arange(g.nlanes) // 32) * 32 + j
        wd(g, a(g)[src] if np.ndim(a(g)) else a(g), m)
        if wp is not None:
            wp(g, ok, m)
    return run


@builds("vote")
def vote(ins, ctx):
    mode = ins.parts[2] if ins.parts[1] == "sync" else ins.parts[1]
    p = ctx.read(ins.operands[1], "pred")
    if mode == "ballot":
        w = ctx.write(ins.operands[0], "b32")
        return lambda g, m: w(g, _ballot(np.broadcast_to(p(g), (g.nlanes,)) & _active(g, m)), m)
    w = ctx.write(ins.operands[0], "pred")

    def run(g, m):
        act = _active(g, m)
        pv = np.broadcast_to(p(g), (g.nlanes,))
        yes = _ballot(pv & act)
        members = _ballot(act)
        if mode == "all":
            r = yes == members
        elif mode == "any":
            r = yes != 0
        else:  # uni
            r = (yes == 0) | (yes == members)
        w(g, r, m)
    return run


@builds("activemask")
def activemask(ins, ctx):
    w = ctx.write(ins.operands[0], "b32")
    return lambda g, m: w(g, _ballot(_active(g, m)), m)


@builds("redux")
def redux(ins, ctx):
    op, typ = ins.parts[2], ins.parts[-1]
    a = ctx.read(ins.operands[1], typ)
    w = ctx.write(ins.operands[0], typ)
    f = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
         "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    identity = {"add": 0, "min": np.iinfo(np.int64).max, "max": np.iinfo(np.int64).min,
                "and": -1, "or": 0, "xor": 0}[op]

    def run(g, m):
        act = _active(g, m).reshape(-1, 32)
        v = np.broadcast_to(a(g), (g.nlanes,)).astype(np.int64).reshape(-1, 32)
        v = np.where(act, v, identity)
        r = f.reduce(v, axis=1)
        w(g, np.repeat(r, 32).astype(a(g).dtype), m)
    return run


@builds("bar.warp")
def warp_barrier(ins, ctx):
    """Lanes of a warp that reach the same instruction already run together here."""
    return lambda g, m: None
