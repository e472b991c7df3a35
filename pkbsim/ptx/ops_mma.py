"""Tensor-core instructions: ldmatrix, mma.sync (m16n8k8/k16, f16/bf16 inputs) and legacy wmma.

Products accumulate in float64 and round once to the accumulator type; hardware accumulates in at least
fp32 with unspecified order, so results agree to rounding. wmma fragments are opaque in PTX; here
lane l holds elements [8l, 8l+8) of the row-major tile, consistently for load, mma and store.
"""
from __future__ import annotations

import re

import numpy as np

from .access import load, store
from .dtypes import bf16_to_f32, f16_to_f32
from .ops_float import to_half_bits
from .registry import builds

LANE = np.arange(32)
G, T = LANE >> 2, LANE & 3


def _halves(u32):
    u = np.asarray(u32, dtype=np.uint32)
    return (u & np.uint32(0xFFFF)).astype(np.uint16), (u >> np.uint32(16)).astype(np.uint16)


def _to_f64(bits16, typ):
    return (bf16_to_f32(bits16) if typ == "bf16" else f16_to_f32(bits16)).astype(np.float64)


def _warps(g, regs):
    """Stack register arrays -> (warps, 32, n)."""
    return np.stack([r(g) for r in regs], axis=-1).reshape(-1, 32, len(regs))


def _mma_fragments(m, n, k):
    """(row, col) per lane, register and half for A, B and C of mma.m16n8k{8,16}."""
    a_pos = [(G, 2 * T), (G + 8, 2 * T), (G, 2 * T + 8), (G + 8, 2 * T + 8)][: k // 4]
    b_pos = [(2 * T, G), (2 * T + 8, G)][: k // 8]
    c_pos = [(G, 2 * T), (G, 2 * T + 1), (G + 8, 2 * T), (G + 8, 2 * T + 1)]
    return a_pos, b_pos, c_pos


@builds("mma")
def mma(ins, ctx):
    shape = next(p for p in ins.parts if re.match(r"m\d+n\d+k\d+", p))
    m, n, k = map(int, re.findall(r"\d+", shape))
    if (m, n) != (16, 8) or k not in (8, 16) or "row" not in ins.parts or "col" not in ins.parts:
        raise ctx.fail(ins.opcode)
    dt, at, bt, ct = ins.parts[-4:]
    if at not in ("bf16", "f16") or bt != at or dt not in ("f32", "f16") or ct != dt:
        raise ctx.fail(ins.opcode)
    dv, av, bv, cv = (ctx.vector(o) for o in ins.operands)
    acc_io = "f32" if dt == "f32" else "b32"
    D = [ctx.write(x, acc_io) for x in dv]
    A = [ctx.read(x, "b32") for x in av]
    B = [ctx.read(x, "b32") for x in bv]
    C = [ctx.read(x, acc_io) for x in cv]
    a_pos, b_pos, c_pos = _mma_fragments(m, n, k)

    def run(g, mask):
        a_regs, b_regs = _warps(g, A), _warps(g, B)
        W = a_regs.shape[0]
        Am, Bm, Cm = np.zeros((W, m, k)), np.zeros((W, k, n)), np.zeros((W, m, n))
        for i, (r, c) in enumerate(a_pos):
            lo, hi = _halves(a_regs[:, :, i])
            Am[:, r, c], Am[:, r, c + 1] = _to_f64(lo, at), _to_f64(hi, at)
        for i, (r, c) in enumerate(b_pos):
            lo, hi = _halves(b_regs[:, :, i])
            Bm[:, r, c], Bm[:, r + 1, c] = _to_f64(lo, at), _to_f64(hi, at)
        c_regs = _warps(g, C)
        if dt == "f32":
            for i, (r, c) in enumerate(c_pos):
                Cm[:, r, c] = c_regs[:, :, i]
        else:
            for i in range(2):
                lo, hi = _halves(c_regs[:, :, i])
                r, c = c_pos[2 * i]
                Cm[:, r, c], Cm[:, r, c + 1] = _to_f64(lo, "f16"), _to_f64(hi, "f16")
        Dm = Am @ Bm + Cm
        if dt == "f32":
            for i, (r, c) in enumerate(c_pos):
                D[i](g, Dm[:, r, c].astype(np.float32).reshape(-1), mask)
        else:
            for i in range(2):
                r, c = c_pos[2 * i]
                lo = to_half_bits(Dm[:, r, c], "f16").astype(np.uint32)
                hi = to_half_bits(Dm[:, r, c + 1], "f16").astype(np.uint32)
                D[i](g, (lo | (hi << np.uint32(16))).reshape(-1), mask)
    return run


@builds("ldmatrix")
def ldmatrix(ins, ctx):
    count = int(next(p for p in ins.parts if p in ("x1", "x2", "x4"))[1:])
    trans = "trans" in ins.parts
    space = "shared" if any(p.startswith("shared") for p in ins.parts) else "generic"
    dests = [ctx.write(x, "b32") for x in ctx.vector(ins.operands[0])]
    addr = ctx.address(ins.operands[1])

    def run(g, mask):
        a = np.broadcast_to(addr(g), (g.nlanes,)).reshape(-1, 32)
        rows = a[:, : 8 * count].reshape(-1)                       # (warps*8*count) row addresses
        lanes = (np.arange(a.shape[0])[:, None] * 32 + np.arange(8 * count)).reshape(-1)
        data = load(g, space, rows, lanes, np.uint16, 8).reshape(-1, count, 8, 8)
        if trans:
            data = data.transpose(0, 1, 3, 2)
        for j, w in enumerate(dests):
            lo = data[:, j, G, 2 * T].astype(np.uint32)
            hi = data[:, j, G, 2 * T + 1].astype(np.uint32)
            w(g, (lo | (hi << np.uint32(16))).reshape(-1), mask)
    return run


# --- wmma --------------------------------------------------------------------------------------------
def _wmma_shape(parts):
    shape = next(p for p in parts if re.match(r"m\d+n\d+k\d+", p))
    return tuple(map(int, re.findall(r"\d+", shape)))


def _tile_dims(which, m, n, k):
    return {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[which]


@builds("wmma.load", "wmma.store")
def wmma_load_store(ins, ctx):
    which = ins.parts[2]
    m, n, k = _wmma_shape(ins.parts)
    layout = "col" if "col" in ins.parts else "row"
    typ = ins.parts[-1]
    space = next((p for p in ins.parts if p in ("global", "shared")), "generic")
    rows, cols = _tile_dims(which, m, n, k)
    elem = np.uint16 if typ in ("bf16", "f16") else np.float32 if typ == "f32" else None
    if elem is None:
        raise ctx.fail(ins.opcode)
    per_lane = rows * cols // 32
    is_load = ins.parts[1] == "load"
    regs_op, addr_op = (ins.operands[0], ins.operands[1]) if is_load else (ins.operands[1], ins.operands[0])
    names = ctx.vector(regs_op)
    io = "b32" if elem == np.uint16 else "f32"
    stride = ctx.read(ins.operands[2], "u32") if len(ins.operands) > 2 else None
    addr = ctx.address(addr_op)
    r_idx, c_idx = np.divmod(np.arange(rows * cols), cols)

    def offsets(g):
        a = np.broadcast_to(addr(g), (g.nlanes,)).reshape(-1, 32)[:, 0]
        s = int(np.broadcast_to(stride(g), (g.nlanes,))[0]) if stride else cols
        elem_off = r_idx * s + c_idx if layout == "row" else c_idx * s + r_idx
        return a[:, None] + (elem_off * np.dtype(elem).itemsize).astype(np.uint64)[None, :]

    if is_load:
        W_ = [ctx.write(x, io) for x in names]

        def run(g, mask):
            flat = offsets(g)
            vals = load(g, space, flat.reshape(-1), np.repeat(np.arange(0, g.nlanes, 32), rows * cols), elem)
            lane_vals = vals.reshape(-1, 32, per_lane)
            if elem == np.uint16:
                pairs = lane_vals.reshape(-1, 32, per_lane // 2, 2).astype(np.uint32)
                packed = pairs[..., 0] | (pairs[..., 1] << np.uint32(16))
                for i, w in enumerate(W_):
                    w(g, packed[:, :, i].reshape(-1), mask)
            else:
                for i, w in enumerate(W_):
                    w(g, lane_vals[:, :, i].reshape(-1), mask)
        return run

    R_ = [ctx.read(x, io) for x in names]

    def run_store(g, mask):
        regs = np.stack([np.broadcast_to(r(g), (g.nlanes,)) for r in R_], axis=-1).reshape(-1, 32, len(R_))
        if elem == np.uint16:
            lo, hi = _halves(regs)
            vals = np.stack([lo, hi], axis=-1).reshape(regs.shape[0], -1)
        else:
            vals = regs.reshape(regs.shape[0], -1)
        flat = offsets(g)
        store(g, space, flat.reshape(-1), np.repeat(np.arange(0, g.nlanes, 32), rows * cols), elem, vals.reshape(-1, 1))
    return run_store


@builds("wmma.mma")
def wmma_mma(ins, ctx):
    m, n, k = _wmma_shape(ins.parts)
    types = [p for p in ins.parts if p in ("f32", "f16", "bf16")]
    dt, ct = types[0], types[-1]
    at = types[1] if len(types) == 4 else "f16"
    dv, av, bv, cv = (ctx.vector(o) for o in ins.operands)
    acc_io = "f32" if dt == "f32" else "b32"
    D = [ctx.write(x, acc_io) for x in dv]
    A, B = [ctx.read(x, "b32") for x in av], [ctx.read(x, "b32") for x in bv]
    C = [ctx.read(x, "f32" if ct == "f32" else "b32") for x in cv]

    def tile(g, regs, typ, rows, cols):
        r = _warps(g, regs)
        if typ in ("f16", "bf16"):
            lo, hi = _halves(r)
            v = np.stack([_to_f64(lo, typ), _to_f64(hi, typ)], axis=-1)
        else:
            v = r.astype(np.float64)
        return v.reshape(-1, rows, cols)

    def run(g, mask):
        Dm = tile(g, A, at, m, k) @ tile(g, B, at, k, n) + tile(g, C, ct, m, n)
        flat = Dm.reshape(Dm.shape[0], 32, -1)
        if dt == "f32":
            for i, w in enumerate(D):
                w(g, flat[:, :, i].astype(np.float32).reshape(-1), mask)
        else:
            for i, w in enumerate(D):
                lo = to_half_bits(flat[:, :, 2 * i], "f16").astype(np.uint32)
                hi = to_half_bits(flat[:, :, 2 * i + 1], "f16").astype(np.uint32)
                w(g, (lo | (hi << np.uint32(16))).reshape(-1), mask)
    return run
