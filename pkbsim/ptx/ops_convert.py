"""Moves, conversions, address-space conversions, comparisons and selects."""
from __future__ import annotations

import numpy as np

from .dtypes import UNSIGNED_OF_SIZE, bf16_to_f32, carrier, f32_to_fp8, fp8_to_f32, is_float, round_to
from .memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_MASK
from .ops_float import to_half_bits, unpack
from .registry import builds


@builds("mov")
def mov(ins, ctx):
    typ = ins.parts[-1]
    dst, src = ins.operands[0].strip(), ins.operands[1].strip()
    width = carrier(typ).itemsize * 8
    if src.startswith("{"):          # pack: mov.b32 d, {lo, hi}
        parts = ctx.vector(src)
        pw = width // len(parts)
        pt = f"b{pw}"
        readers = [ctx.read(p, pt) for p in parts]
        u = UNSIGNED_OF_SIZE[width // 8]
        w = ctx.write(dst, typ)

        def pack(g, m):
            out = np.zeros((), u)
            for i, r in enumerate(readers):
                out = out | (np.asarray(r(g)).astype(u) << u(i * pw))
            w(g, out.view(carrier(typ)) if out.dtype != carrier(typ) else out, m)
        return pack
    if dst.startswith("{"):          # unpack: mov.b64 {lo, hi}, d
        parts = ctx.vector(dst)
        pw = width // len(parts)
        r = ctx.read(src, f"b{width}")
        writers = [ctx.write(p, f"b{pw}") for p in parts]
        pu = UNSIGNED_OF_SIZE[pw // 8]
        mask = (1 << pw) - 1

        def unpack_(g, m):
            v = r(g)
            for i, w in enumerate(writers):
                w(g, ((v >> v.dtype.type(i * pw)) & v.dtype.type(mask)).astype(pu), m)
        return unpack_
    r = ctx.read(src, typ)
    w = ctx.write(dst, typ)
    return lambda g, m: w(g, r(g), m)


def _int_from_float(x64, c, mode):
    info = np.iinfo(c)
    fn = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}.get(mode, np.trunc)
    with np.errstate(invalid="ignore"):
        r = fn(x64)
        r = np.where(np.isnan(r), 0, np.clip(r, info.min, info.max))
        if c.itemsize == 8:  # clip to 2**63 rounds up in float64: saturate explicitly
            big = x64 >= float(info.max)
            out = r.astype(np.float64)
            res = np.where(big, 0, out).astype(c)
            return np.where(big, c.type(info.max), res)
        return r.astype(c)


@builds("cvt")
def cvt(ins, ctx):
    mods = ins.parts[1:-2]
    dt, st = ins.parts[-2], ins.parts[-1]
    sat = "sat" in mods or "satfinite" in mods
    mode = next((x for x in mods if x in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "rna")), "")
    w_t = {"f16": "b16", "bf16": "b16", "bf16x2": "b32", "f16x2": "b32", "e4m3x2": "b16", "e5m2x2": "b16",
           "tf32": "b32"}.get(dt, dt)
    if dt in ("bf16x2", "f16x2", "e4m3x2", "e5m2x2") and st == "f32":   # d = {a -> hi, b -> lo}
        a, b = ctx.read(ins.operands[1], "f32"), ctx.read(ins.operands[2], "f32")
        w = ctx.write(ins.operands[0], w_t)
        relu = "relu" in mods

        def pack2(g, m):
            hi, lo = a(g).astype(np.float64), b(g).astype(np.float64)
            if relu:
                hi, lo = np.maximum(hi, 0), np.maximum(lo, 0)
            if dt.startswith("e"):
                kind = dt[:4]
                h, l_ = f32_to_fp8(hi, kind, sat).astype(np.uint16), f32_to_fp8(lo, kind, sat).astype(np.uint16)
                w(g, (h << np.uint16(8)) | l_, m)
            else:
                half = dt[:-2]
                h, l_ = to_half_bits(hi, half, mode or "rn"), to_half_bits(lo, half, mode or "rn")
                w(g, (h.astype(np.uint32) << np.uint32(16)) | l_.astype(np.uint32), m)
        return pack2
    if st in ("e4m3x2", "e5m2x2") and dt in ("f16x2", "bf16x2"):
        a = ctx.read(ins.operands[1], "b16")
        w = ctx.write(ins.operands[0], "b32")
        half = dt[:-2]

        def unpack8(g, m):
            v = a(g)
            lo = fp8_to_f32(v & np.uint16(0xFF), st[:4]).astype(np.float64)
            hi = fp8_to_f32(v >> np.uint16(8), st[:4]).astype(np.float64)
            w(g, (to_half_bits(hi, half).astype(np.uint32) << np.uint32(16)) | to_half_bits(lo, half).astype(np.uint32), m)
        return unpack8
    if dt.endswith("x2") or st.endswith("x2"):
        raise ctx.fail(ins.opcode)
    r_t = {"f16": "b16", "bf16": "b16", "tf32": "b32"}.get(st, st)
    src = ctx.read(ins.operands[1], r_t)
    w = ctx.write(ins.operands[0], w_t)
    conv = _converter(ins, ctx, dt, st, mode, sat, "relu" in mods)
    return lambda g, m: w(g, conv(src(g)), m)


def _to_float64(st, v):
    if st in ("f16", "bf16"):
        return unpack(st, v)[0]
    if st == "tf32":
        return np.asarray(v).view(np.float32).astype(np.float64)
    return np.asarray(v).astype(np.float64)


def _converter(ins, ctx, dt, st, mode, sat, relu):
    dc = carrier(dt)
    if is_float(dt) or dt == "tf32":
        def to_float(v):
            x = _to_float64(st, v)
            if mode in ("rni", "rzi", "rmi", "rpi"):
                x = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[mode](x)
            if relu:
                x = np.maximum(x, 0)
            if sat:
                x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
            if dt in ("f16", "bf16"):
                return to_half_bits(x, dt, mode if mode in ("rn", "rz", "rm", "rp") else "rn")
            if dt == "tf32":  # keep 10 mantissa bits, round half away (rna)
                u = x.astype(np.float32).view(np.uint32)
                return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000))
            if dt == "f32" and st == "f32" and not mode and not sat:
                return np.asarray(v, dtype=np.float32)
            if st in ("s64", "u64") and dt == "f32":
                return round_to(_int64_to_f64_then(v), np.float32, mode if mode in ("rz", "rm", "rp") else "rn")
            return round_to(x, dc, mode if mode in ("rz", "rm", "rp") else "rn")
        return to_float
    if is_float(st):
        def to_int(v):
            return _int_from_float(_to_float64(st, v), dc, mode or "rzi")
        return to_int
    sc = carrier(st)

    def to_int_from_int(v):
        v = np.asarray(v)
        if sat:
            info = np.iinfo(dc)
            return np.clip(v.astype(np.float64) if sc.itemsize == 8 else v.astype(np.int64),
                           info.min, info.max).astype(dc)
        return v.astype(sc, copy=False).astype(dc)
    return to_int_from_int


def _int64_to_f64_then(v):
    # float64 cannot hold every int64: round to odd via two halves so the f32 rounding stays correct
    v = np.asarray(v)
    hi = (v >> v.dtype.type(12)).astype(np.float64) * 4096.0
    lo = (v & v.dtype.type(0xFFF)).astype(np.float64)
    return hi + lo


@builds("cvta")
def cvta(ins, ctx):
    to = "to" in ins.parts
    space = next(p for p in ins.parts[1:] if p in ("global", "shared", "local", "const", "param"))
    typ = ins.parts[-1]
    r, w = ctx.read(ins.operands[1], typ), ctx.write(ins.operands[0], typ)
    c = carrier(typ)
    if space in ("global", "const", "param"):
        return lambda g, m: w(g, r(g), m)
    window = SHARED_WINDOW if space == "shared" else LOCAL_WINDOW
    if to:
        return lambda g, m: w(g, (np.asarray(r(g)).astype(np.uint64) & np.uint64(WINDOW_MASK)).astype(c), m)
    return lambda g, m: w(g, np.asarray(r(g)).astype(np.uint64) + np.uint64(window), m)


@builds("isspacep")
def isspacep(ins, ctx):
    """Whether a generic address falls in a state space: shared and local addresses are this interpreter's
    windows (cvta), any other generic address is global. CCCL (13.5) asks `isspacep.local` in its atomics. A
    generic address of the const or param space looks like a global one here: not simulated."""
    space = ins.parts[1].split("::")[0]
    if space not in ("global", "shared", "local"):
        raise ctx.fail(ins.opcode)
    r, w = ctx.read(ins.operands[1], "u64"), ctx.write(ins.operands[0], "pred")
    high = np.uint64(~WINDOW_MASK & (2**64 - 1))

    def run(g, m):
        window = np.asarray(r(g)).astype(np.uint64) & high
        if space == "global":
            w(g, (window != np.uint64(SHARED_WINDOW)) & (window != np.uint64(LOCAL_WINDOW)), m)
        else:
            w(g, window == np.uint64(SHARED_WINDOW if space == "shared" else LOCAL_WINDOW), m)
    return run


_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}


def comparison(cmp: str, typ: str):
    """fn(a, b) -> bool array, with PTX's ordered/unordered float semantics."""
    if cmp in ("num", "nan"):
        return (lambda a, b: ~np.isnan(a) & ~np.isnan(b)) if cmp == "num" else (lambda a, b: np.isnan(a) | np.isnan(b))
    if cmp.endswith("u") and cmp[:-1] in _CMP and is_float(typ):
        base = _CMP[cmp[:-1]]
        return lambda a, b: base(a, b) | np.isnan(a) | np.isnan(b)
    base = _CMP[cmp]
    if cmp == "ne" and is_float(typ):
        return lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b)
    return base


def _float_reader(ctx, op, typ):
    if typ in ("f16", "bf16"):
        r = ctx.read(op, "b16")
        return lambda g: (bf16_to_f32(r(g)) if typ == "bf16" else np.asarray(r(g)).view(np.float16))
    return ctx.read(op, typ)


def _flush_subnormals(r):
    """`.ftz`: f32 subnormal inputs count as zero of the same sign."""
    tiny = np.float32(np.finfo(np.float32).tiny)

    def read(g):
        v = np.asarray(r(g))
        return np.where(np.abs(v) < tiny, np.copysign(np.float32(0), v), v).astype(v.dtype)
    return read


@builds("setp")
def setp(ins, ctx):
    parts = [p for p in ins.parts if p != "ftz"]
    ftz = len(parts) != len(ins.parts) and parts[-1] == "f32"
    cmp, typ = parts[1], parts[-1]
    boolop = parts[2] if len(parts) > 3 else None
    if typ.endswith("x2"):
        raise ctx.fail(ins.opcode)
    f = comparison(cmp, typ)
    if typ.startswith(("u", "b")):
        typ = "u" + typ[1:]
    dests = ins.operands[0].split("|")
    a, b = _float_reader(ctx, ins.operands[1], typ), _float_reader(ctx, ins.operands[2], typ)
    if ftz:
        a, b = _flush_subnormals(a), _flush_subnormals(b)
    c = ctx.read(ins.operands[3], "pred") if boolop else None
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop)
    wp = ctx.write(dests[0], "pred")
    wq = ctx.write(dests[1], "pred") if len(dests) > 1 else None

    def run(g, m):
        t = f(a(g), b(g))
        p = comb(t, c(g)) if comb else t
        wp(g, p, m)
        if wq is not None:
            wq(g, comb(~t, c(g)) if comb else ~t, m)
    return run


@builds("set")
def set_(ins, ctx):
    cmp, dt, st = ins.parts[1], ins.parts[-2], ins.parts[-1]
    f = comparison(cmp, st)
    a, b = ctx.read(ins.operands[1], st), ctx.read(ins.operands[2], st)
    w = ctx.write(ins.operands[0], dt)
    true = np.float32(1.0) if dt == "f32" else carrier(dt).type(-1) if dt.startswith("s") else \
        np.array(-1).astype(carrier(dt))[()]
    return lambda g, m: w(g, np.where(f(a(g), b(g)), true, carrier(dt).type(0)), m)


@builds("selp")
def selp(ins, ctx):
    typ = ins.parts[-1]
    a, b = ctx.read(ins.operands[1], typ), ctx.read(ins.operands[2], typ)
    c = ctx.read(ins.operands[3], "pred")
    w = ctx.write(ins.operands[0], typ)
    return lambda g, m: w(g, np.where(c(g), a(g), b(g)), m)


@builds("slct")
def slct(ins, ctx):
    typ, ct = ins.parts[-2], ins.parts[-1]
    a, b, c = ctx.read(ins.operands[1], typ), ctx.read(ins.operands[2], typ), ctx.read(ins.operands[3], ct)
    w = ctx.write(ins.operands[0], typ)
    return lambda g, m: w(g, np.where(c(g) >= 0, a(g), b(g)), m)


