"""Integer and bit instructions (and the dispatch of shared arithmetic opcodes to ops_float)."""
from __future__ import annotations

import numpy as np

from . import ops_float
from .dtypes import SIGNED_OF_SIZE, UNSIGNED_OF_SIZE, carrier, is_float
from .registry import builds


def _binary(ins, ctx, typ, f):
    a, b = ctx.read(ins.operands[1], typ), ctx.read(ins.operands[2], typ)
    w = ctx.write(ins.operands[0], typ)
    return lambda g, m: w(g, f(a(g), b(g)), m)


def _wide(typ: str) -> str:
    return typ[0] + str(int(typ[1:]) * 2)


def _mul_hi(a, b, typ):
    c = carrier(typ)
    if c.itemsize < 8:
        wide = np.dtype(SIGNED_OF_SIZE[c.itemsize * 2] if c.kind == "i" else UNSIGNED_OF_SIZE[c.itemsize * 2])
        return ((a.astype(wide) * b.astype(wide)) >> (8 * c.itemsize)).astype(c)
    # 64x64 -> high 64 via 32-bit halves (numpy has no 128-bit integers)
    ua, ub = np.asarray(a).view(np.uint64), np.asarray(b).view(np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    al, ah, bl, bh = ua & m32, ua >> s32, ub & m32, ub >> s32
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    hi = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    if c.kind == "i":  # signed correction: subtract b (resp. a) where a (resp. b) is negative
        hi = hi - np.where(np.asarray(a) < 0, ub, 0).astype(np.uint64) - np.where(np.asarray(b) < 0, ua, 0).astype(np.uint64)
    return hi.view(c)


def _mul(typ, mode):
    if mode == "wide":
        wt = _wide(typ)
        c = carrier(wt)
        return lambda a, b: a.astype(c) * b.astype(c), wt
    if mode == "hi":
        return lambda a, b: _mul_hi(a, b, typ), typ
    return lambda a, b: a * b, typ


@builds("add", "sub", "mul", "mad", "min", "max", "div", "rem", "abs", "neg", "fma", "copysign",
        "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "testp")
def arith(ins, ctx):
    typ = ins.parts[-1]
    if is_float(typ) or ins.parts[0] in ("fma", "copysign", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin",
                                         "cos", "tanh", "testp"):
        return ops_float.build(ins, ctx)
    op, mods = ins.parts[0], set(ins.parts[1:-1])
    if "cc" in mods:
        raise ctx.fail(f"{ins.opcode} (carry chains)")
    if op in ("add", "sub"):
        f = np.add if op == "add" else np.subtract
        if "sat" in mods:
            return _binary(ins, ctx, typ, lambda a, b: np.clip(f(a.astype(np.int64), b.astype(np.int64)),
                                                            -2**31, 2**31 - 1).astype(np.int32))
        return _binary(ins, ctx, typ, f)
    if op == "mul":
        mode = "wide" if "wide" in mods else "hi" if "hi" in mods else "lo"
        f, out_t = _mul(typ, mode)
        a, b = ctx.read(ins.operands[1], typ), ctx.read(ins.operands[2], typ)
        w = ctx.write(ins.operands[0], out_t)
        return lambda g, m: w(g, f(a(g), b(g)), m)
    if op == "mad":
        mode = "wide" if "wide" in mods else "hi" if "hi" in mods else "lo"
        f, out_t = _mul(typ, mode)
        a, b = ctx.read(ins.operands[1], typ), ctx.read(ins.operands[2], typ)
        c = ctx.read(ins.operands[3], out_t)
        w = ctx.write(ins.operands[0], out_t)
        return lambda g, m: w(g, f(a(g), b(g)) + c(g), m)
    if op in ("min", "max"):
        return _binary(ins, ctx, typ, np.minimum if op == "min" else np.maximum)
    if op in ("div", "rem"):
        return _binary(ins, ctx, typ, _divrem(typ, op))
    a, w = ctx.read(ins.operands[1], typ), ctx.write(ins.operands[0], typ)
    if op == "abs":
        return lambda g, m: w(g, np.abs(a(g)), m)
    return lambda g, m: w(g, np.negative(a(g)), m)


def _divrem(typ, op):
    c = carrier(typ)
    ones = np.array(-1).astype(c)

    def f(a, b):
        zero = b == 0
        safe = np.where(zero, np.ones((), c), b)
        if c.kind == "u":
            r = a // safe if op == "div" else a % safe
        else:
            q = np.abs(a.astype(np.int64) if c.itemsize < 8 else a) // np.abs(safe.astype(np.int64) if c.itemsize < 8 else safe)
            q = np.where((a < 0) ^ (safe < 0), -q, q).astype(c)
            r = q if op == "div" else (a - q * safe).astype(c)
        return np.where(zero, ones if op == "div" else a, r)
    return f


@builds("and", "or", "xor")
def logic(ins, ctx):
    typ = ins.parts[-1]
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[ins.parts[0]]
    return _binary(ins, ctx, typ, f)


@builds("not", "cnot", "popc", "clz", "brev")
def unary_bits(ins, ctx):
    typ, op = ins.parts[-1], ins.parts[0]
    a = ctx.read(ins.operands[1], typ)
    bits = carrier(typ).itemsize * 8
    if op == "not":
        f = np.logical_not if typ == "pred" else np.invert
        w = ctx.write(ins.operands[0], typ)
        return lambda g, m: w(g, f(a(g)), m)
    if op == "cnot":
        w = ctx.write(ins.operands[0], typ)
        return lambda g, m: w(g, (a(g) == 0).astype(carrier(typ)), m)
    if op == "brev":
        w = ctx.write(ins.operands[0], typ)
        return lambda g, m: w(g, _brev(a(g), bits), m)
    w = ctx.write(ins.operands[0], "u32")
    if op == "popc":
        return lambda g, m: w(g, _popcount(a(g), bits), m)
    return lambda g, m: w(g, _clz(a(g), bits), m)


def _popcount(x, bits):
    u = np.asarray(x).view(UNSIGNED_OF_SIZE[bits // 8]).astype(np.uint64)
    return np.bitwise_count(u).astype(np.uint32) if hasattr(np, "bitwise_count") else \
        np.array([int(v).bit_count() for v in np.atleast_1d(u)], np.uint32)


def _clz(x, bits):
    u = np.atleast_1d(np.asarray(x).view(UNSIGNED_OF_SIZE[bits // 8])).astype(np.uint64)
    out = np.full(u.shape, bits, np.uint32)
    nz = u != 0
    # floor(log2) through float64 is exact below 2**53; fix the rare rounding-up above it
    lg = np.floor(np.log2(np.where(nz, u, 1).astype(np.float64))).astype(np.int64)
    lg = np.where((np.uint64(1) << lg.astype(np.uint64)) > u, lg - 1, lg)
    out[nz] = (bits - 1 - lg[nz]).astype(np.uint32)
    return out


def _brev(x, bits):
    u = np.asarray(x).view(UNSIGNED_OF_SIZE[bits // 8])
    out = np.zeros_like(u)
    for i in range(bits):
        out |= ((u >> u.dtype.type(i)) & u.dtype.type(1)) << u.dtype.type(bits - 1 - i)
    return out


@builds("shl", "shr")
def shift(ins, ctx):
    typ = ins.parts[-1]
    c = carrier(typ)
    bits = 8 * c.itemsize
    a, b = ctx.read(ins.operands[1], typ), ctx.read(ins.operands[2], "u32")
    w = ctx.write(ins.operands[0], typ)
    if ins.parts[0] == "shl":
        def f(x, s):
            big = s >= bits
            return np.where(big, c.type(0), x << np.where(big, 0, s).astype(c))
    else:
        def f(x, s):
            big = s >= bits
            sh = np.where(big, bits - 1, s).astype(c)
            r = x >> sh
            if c.kind == "u":
                r = np.where(big, c.type(0), r)
            return r
    return lambda g, m: w(g, f(a(g), b(g)), m)


@builds("shf")
def funnel_shift(ins, ctx):
    left, clamp = "l" in ins.parts, "clamp" in ins.parts
    a, b, s = (ctx.read(o, "u32") for o in ins.operands[1:4])
    w = ctx.write(ins.operands[0], "u32")

    def f(g, m):
        n = s(g)
        n = np.minimum(n, 32) if clamp else n & np.uint32(31)
        wide = (b(g).astype(np.uint64) << np.uint64(32)) | a(g).astype(np.uint64)
        if left:
            r = (wide << n.astype(np.uint64)) >> np.uint64(32)
        else:
            r = wide >> n.astype(np.uint64)
        w(g, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), m)
    return f


@builds("bfe")
def bit_extract(ins, ctx):
    typ = ins.parts[-1]
    c = carrier(typ)
    bits = 8 * c.itemsize
    a = ctx.read(ins.operands[1], typ)
    pos, ln = ctx.read(ins.operands[2], "u32"), ctx.read(ins.operands[3], "u32")
    w = ctx.write(ins.operands[0], typ)

    def f(g, m):
        p, L = np.minimum(pos(g) & np.uint32(0xFF), bits).astype(np.int64), np.minimum(ln(g) & np.uint32(0xFF), bits).astype(np.int64)
        u = np.asarray(a(g)).view(UNSIGNED_OF_SIZE[c.itemsize]).astype(np.uint64)
        val = (u >> np.minimum(p, 63).astype(np.uint64)) & ((np.uint64(1) << L.astype(np.uint64)) - np.uint64(1))
        val = np.where(L >= 64, u >> np.minimum(p, 63).astype(np.uint64), val)
        if c.kind == "i":
            sign_pos = np.minimum(p + L - 1, bits - 1)
            sbit = (u >> sign_pos.astype(np.uint64)) & np.uint64(1)
            ext = np.where((L > 0) & (sbit == 1), ~((np.uint64(1) << L.astype(np.uint64)) - np.uint64(1)), np.uint64(0))
            val = val | np.where(L < 64, ext, np.uint64(0))
        w(g, val.astype(UNSIGNED_OF_SIZE[c.itemsize]).view(c), m)
    return f


@builds("bfi")
def bit_insert(ins, ctx):
    typ = ins.parts[-1]
    bits = 8 * carrier(typ).itemsize
    a, b = ctx.read(ins.operands[1], typ), ctx.read(ins.operands[2], typ)
    pos, ln = ctx.read(ins.operands[3], "u32"), ctx.read(ins.operands[4], "u32")
    w = ctx.write(ins.operands[0], typ)
    u = UNSIGNED_OF_SIZE[bits // 8]

    def f(g, m):
        p = np.minimum(pos(g) & np.uint32(0xFF), bits).astype(np.uint64)
        L = np.minimum(ln(g) & np.uint32(0xFF), bits).astype(np.uint64)
        field = np.where(L >= 64, ~np.uint64(0), (np.uint64(1) << L) - np.uint64(1))
        mask = np.where(p >= bits, np.uint64(0), field << np.minimum(p, 63))
        av, bv = np.asarray(a(g)).view(u).astype(np.uint64), np.asarray(b(g)).view(u).astype(np.uint64)
        r = (bv & ~mask) | ((av << np.minimum(p, 63)) & mask)
        w(g, r.astype(u), m)
    return f


@builds("bmsk")
def bit_mask(ins, ctx):
    a, b = ctx.read(ins.operands[1], "u32"), ctx.read(ins.operands[2], "u32")
    w = ctx.write(ins.operands[0], "u32")
    wrap = "wrap" in ins.parts

    def f(g, m):
        p, n = a(g).astype(np.int64), b(g).astype(np.int64)
        if wrap:
            p, n = p & 31, n & 31
        else:
            p, n = np.minimum(p, 32), np.minimum(n, 32)
        width = np.minimum(n, 32 - p)
        r = (((np.int64(1) << width) - 1) << p) & 0xFFFFFFFF
        w(g, r.astype(np.uint32), m)
    return f


@builds("prmt")
def permute(ins, ctx):
    if len(ins.parts) > 2:
        raise ctx.fail(ins.opcode)
    a, b, c = (ctx.read(o, "u32") for o in ins.operands[1:4])
    w = ctx.write(ins.operands[0], "u32")

    def f(g, m):
        av, bv, sel = np.broadcast_arrays(a(g), b(g), c(g))
        pool = (bv.astype(np.uint64) << np.uint64(32)) | av.astype(np.uint64)
        out = np.zeros(av.shape, np.uint32)
        for i in range(4):
            s = ((sel >> np.uint32(4 * i)) & np.uint32(0xF)).astype(np.uint64)
            byte = (pool >> ((s & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            byte = np.where(s & np.uint64(8), np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0)), byte)
            out |= (byte.astype(np.uint32) << np.uint32(8 * i))
        w(g, out, m)
    return f


@builds("lop3")
def lop3(ins, ctx):
    typ = ins.parts[-1]
    a, b, c = (ctx.read(o, typ) for o in ins.operands[1:4])
    lut = int(ins.operands[4], 0)
    w = ctx.write(ins.operands[0], typ)

    def f(g, m):
        x, y, z = a(g), b(g), c(g)
        out = np.zeros(np.broadcast(x, y, z).shape, carrier(typ))
        for i in range(8):
            if lut >> i & 1:
                out |= (x if i & 4 else ~x) & (y if i & 2 else ~y) & (z if i & 1 else ~z)
        w(g, out, m)
    return f
