"""Floating-point instructions for f32/f64 and the half types (f16, bf16 and their packed x2 forms).

f32 with round-to-nearest uses numpy's float32 directly (IEEE, correctly rounded). Directed rounding
and the half types compute in float64 and round once to the destination format. `.approx` functions
use the exact function: the GPU's approximations differ in the last bits, within its documented error.
"""
from __future__ import annotations

import numpy as np

from .dtypes import bf16_to_f32, f32_to_bf16, round_to

ROUNDING = ("rn", "rz", "rm", "rp")


def unpack(typ: str, v):
    """Register bits of `typ` -> list of float64 arrays (two for packed types)."""
    if typ in ("f32", "f64"):
        return [v]
    if typ == "f16":
        return [np.asarray(v).view(np.float16).astype(np.float64)]
    if typ == "bf16":
        return [bf16_to_f32(v).astype(np.float64)]
    half = "f16" if typ == "f16x2" else "bf16"
    u = np.asarray(v, dtype=np.uint32)
    lo, hi = (u & np.uint32(0xFFFF)).astype(np.uint16), (u >> np.uint32(16)).astype(np.uint16)
    return [unpack(half, lo)[0], unpack(half, hi)[0]]


def to_half_bits(x64, half: str, mode: str = "rn"):
    if half == "f16":
        return round_to(x64, np.float16, mode).view(np.uint16)
    if mode == "rn":
        # round to odd into f32, then nearest-even into bf16: one correct rounding overall
        x64 = np.asarray(x64, dtype=np.float64)
        t = round_to(x64, np.float32, "rz")
        inexact = (t.astype(np.float64) != x64) & np.isfinite(x64)
        t = np.where(inexact, (t.view(np.uint32) | np.uint32(1)).view(np.float32), t)
        return f32_to_bf16(t)
    return f32_to_bf16(round_to(x64, np.float32, mode), mode if mode == "rz" else "rn")


def pack(typ: str, values, mode: str = "rn"):
    """float64 (or float32) results -> register bits of `typ`."""
    if typ == "f32":
        v = values[0]
        return v if (v.dtype == np.float32 and mode == "rn") else round_to(v, np.float32, mode)
    if typ == "f64":
        return np.asarray(values[0], dtype=np.float64)
    if typ in ("f16", "bf16"):
        return to_half_bits(values[0], typ, mode)
    half = "f16" if typ == "f16x2" else "bf16"
    lo, hi = (to_half_bits(v, half, mode).astype(np.uint32) for v in values)
    return lo | (hi << np.uint32(16))


def _io_type(typ: str) -> str:
    """The carrier used to read/write registers of a float type."""
    return {"f16": "b16", "bf16": "b16", "f16x2": "b32", "bf16x2": "b32"}.get(typ, typ)


def _flush(x):
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(x) < tiny, np.copysign(0.0, x), x).astype(x.dtype)


def _relu(x):
    return np.where(np.isnan(x), x, np.maximum(x, 0))


def _nanmin(a, b, prop):
    r = np.fmin(a, b)
    # -0.0 < +0.0 for min/max, as PTX specifies
    r = np.where((a == 0) & (b == 0), np.where(np.signbit(a), a, b), r)
    return np.where(np.isnan(a) | np.isnan(b), np.nan, r) if prop else r


def _nanmax(a, b, prop):
    r = np.fmax(a, b)
    r = np.where((a == 0) & (b == 0), np.where(np.signbit(a), b, a), r)
    return np.where(np.isnan(a) | np.isnan(b), np.nan, r) if prop else r


UNARY = {
    "abs": np.abs, "neg": np.negative,
    "rcp": lambda x: 1.0 / x, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
}


def build(ins, ctx):
    op, typ = ins.parts[0], ins.parts[-1]
    mods = set(ins.parts[1:-1])
    mode = next((r for r in ROUNDING if r in mods), "rn")
    io = _io_type(typ)
    srcs = [ctx.read(o, io) for o in ins.operands[1:]]
    w = ctx.write(ins.operands[0], "pred" if op == "testp" else io)
    sat, ftz, relu = "sat" in mods, "ftz" in mods, "relu" in mods
    fast = typ == "f32" and mode == "rn"
    prop = "NaN" in mods

    if op == "testp":
        test = {"finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x),
                "notanumber": np.isnan, "normal": lambda x: np.isfinite(x) & (np.abs(x) >= np.finfo(np.float32).tiny),
                "subnormal": lambda x: (x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)}[ins.parts[1]]
        src = ctx.read(ins.operands[1], typ)
        return lambda g, m: w(g, test(src(g)), m)

    def compute(*vals):
        if op in ("add", "sub", "mul"):
            a, b = vals
            return a + b if op == "add" else a - b if op == "sub" else a * b
        if op in ("fma", "mad"):
            a, b, c = vals
            return a * b + c
        if op == "div":
            return vals[0] / vals[1]
        if op == "min":
            return _nanmin(vals[0], vals[1], prop)
        if op == "max":
            return _nanmax(vals[0], vals[1], prop)
        if op == "copysign":
            return np.copysign(vals[1], vals[0])
        if op in UNARY:
            return UNARY[op](vals[0])
        raise ctx.fail(ins.opcode)

    def finish(r):
        if relu:
            r = _relu(r)
        if sat:
            r = np.where(np.isnan(r), 0.0, np.clip(r, 0.0, 1.0)).astype(r.dtype)
        return r

    if fast and op not in ("fma", "mad"):
        def f32(g, m):
            vals = [s(g) for s in srcs]
            if ftz:
                vals = [_flush(v) for v in vals]
            r = compute(*vals)
            r = finish(np.asarray(r, dtype=np.float32))
            w(g, _flush(r) if ftz else r, m)
        return f32

    def general(g, m):
        parts = [unpack(typ, s(g)) for s in srcs]
        outs = []
        for lane_vals in zip(*parts):
            vals = [np.asarray(v, dtype=np.float64) for v in lane_vals]
            if typ == "f32" and op in UNARY and op not in ("abs", "neg"):
                vals = [v.astype(np.float32) for v in vals]
            outs.append(finish(np.asarray(compute(*vals))))
        r = pack(typ, outs, mode)
        w(g, _flush(r) if (ftz and typ == "f32") else r, m)
    return general
