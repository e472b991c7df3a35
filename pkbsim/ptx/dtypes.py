"""PTX scalar types, their numpy carriers, and the conversions numpy lacks (bf16, fp8, directed rounding).

bf16 and the fp8 formats travel as raw bits (uint16 / uint8); arithmetic on them goes through float32
and rounds back with round-to-nearest-even, which is exact for add/mul/fma-rounded-once semantics.
"""
from __future__ import annotations

import numpy as np

CARRIER = {
    "pred": np.bool_,
    "b8": np.uint8, "u8": np.uint8, "s8": np.int8,
    "b16": np.uint16, "u16": np.uint16, "s16": np.int16, "f16": np.float16, "bf16": np.uint16,
    "b32": np.uint32, "u32": np.uint32, "s32": np.int32, "f32": np.float32,
    "f16x2": np.uint32, "bf16x2": np.uint32, "tf32": np.uint32,
    "b64": np.uint64, "u64": np.uint64, "s64": np.int64, "f64": np.float64,
    "b128": np.uint64,
    "e4m3": np.uint8, "e5m2": np.uint8, "e4m3x2": np.uint16, "e5m2x2": np.uint16,
}
UNSIGNED_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
SIGNED_OF_SIZE = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def carrier(ptx_type: str) -> np.dtype:
    try:
        return np.dtype(CARRIER[ptx_type])
    except KeyError:
        raise KeyError(ptx_type) from None


def storage(ptx_type: str) -> np.dtype:
    """Registers hold raw bits: an unsigned integer of the type's width (bool for predicates)."""
    if ptx_type == "pred":
        return np.dtype(np.bool_)
    return np.dtype(UNSIGNED_OF_SIZE[carrier(ptx_type).itemsize])


def is_float(ptx_type: str) -> bool:
    return ptx_type in ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2")


# --- bf16 -----------------------------------------------------------------------------------------
def bf16_to_f32(bits) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x, mode: str = "rn") -> np.ndarray:
    """float32 -> bf16 bits, rounding to nearest even ('rn') or toward zero ('rz'); NaN stays NaN."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    if mode == "rz":
        out = u >> np.uint32(16)
    else:
        bias = np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
        out = (u + bias) >> np.uint32(16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint32(0x7FFF), out).astype(np.uint16)


def f16_to_f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float32)


def f32_to_f16(x) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16).view(np.uint16)


# --- fp8 (OCP e4m3 "fn" and e5m2) -------------------------------------------------------------------
def _fp8_table(exp_bits: int, man_bits: int, ieee_inf: bool) -> np.ndarray:
    bias = (1 << (exp_bits - 1)) - 1
    out = np.empty(256, np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> man_bits) & ((1 << exp_bits) - 1), b & ((1 << man_bits) - 1)
        if e == 0:
            v = m / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            v = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        if ieee_inf and e == (1 << exp_bits) - 1:
            v = np.inf if m == 0 else np.nan
        if not ieee_inf and e == (1 << exp_bits) - 1 and m == (1 << man_bits) - 1:
            v = np.nan
        out[b] = -v if s else v
    return out


FP8_DECODE = {"e4m3": _fp8_table(4, 3, False), "e5m2": _fp8_table(5, 2, True)}


def _fp8_encoder(kind: str):
    table = FP8_DECODE[kind]
    pos = np.arange(128)
    finite = pos[np.isfinite(table[:128])]
    values = table[finite].astype(np.float64)  # ascending for non-negative codes
    return finite, values


_FP8_POS = {k: _fp8_encoder(k) for k in FP8_DECODE}


def f32_to_fp8(x, kind: str, satfinite: bool = True) -> np.ndarray:
    """Round to nearest even onto the fp8 grid; saturate to the largest finite value (satfinite)."""
    codes, values = _FP8_POS[kind]
    x = np.asarray(x, dtype=np.float64)
    mag = np.abs(x)
    hi = np.clip(np.searchsorted(values, mag), 1, len(values) - 1)
    lo = hi - 1
    d_lo, d_hi = mag - values[lo], values[hi] - mag
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (codes[hi] % 2 == 0))
    code = np.where(pick_hi, codes[hi], codes[lo])
    code = np.where(mag >= values[-1], codes[-1], code)
    if not satfinite:
        top = 0x7C if kind == "e5m2" else 0x7F
        code = np.where(mag > values[-1] * (1 + 2.0 ** -4), top, code)
    code = np.where(np.isnan(x), 0x7F, code) | np.where(np.signbit(x) & ~np.isnan(x), 0x80, 0)
    return code.astype(np.uint8)


def fp8_to_f32(bits, kind: str) -> np.ndarray:
    return FP8_DECODE[kind][np.asarray(bits, dtype=np.uint8)]


# --- directed rounding ---------------------------------------------------------------------------
def round_to(x64: np.ndarray, target, mode: str) -> np.ndarray:
    """Round float64 values to `target` (float32/float16) with PTX mode rn/rz/rm/rp."""
    target = np.dtype(target)
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.asarray(x64, dtype=np.float64).astype(target)
    if mode in ("rn", ""):
        return r
    back = r.astype(np.float64)
    x64 = np.asarray(x64, dtype=np.float64)
    if mode == "rz":
        fix = np.abs(back) > np.abs(x64)
        toward = np.zeros_like(r)
    elif mode == "rm":
        fix = back > x64
        toward = np.full_like(r, -np.inf)
    elif mode == "rp":
        fix = back < x64
        toward = np.full_like(r, np.inf)
    else:
        raise ValueError(mode)
    return np.where(fix, np.nextafter(r, toward), r)
