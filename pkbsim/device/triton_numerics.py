"""Where Triton 3.6's CPU interpreter computes bfloat16 differently from the GPU, done as the GPU does.

The interpreter keeps bfloat16 as raw uint16 bits. Two of its operations then disagree with the hardware,
and a correct bf16 Triton kernel came out "wrong" (ParallelKernelBench Triton-tree problems 11 and 59):
- `tl.dot` converts only 8-bit floats before numpy's matmul, so bf16 tiles are multiplied as integers
  (two 16x16 tiles of ones give 4228120576 instead of 16). Here bf16 operands become float32 first (exact)
  and the product accumulates in float32, as tensor cores do.
- a float32 -> bfloat16 cast (`x.to(tl.bfloat16)`) drops the low mantissa bits (1 + 2^-8 + 2^-10 becomes
  1.0); the GPU rounds to nearest even (1.0078125). Here torch does the rounding. Casts between bf16 and
  integers or float16 went through the raw bits; here through the values.
- 8-bit floats are raw uint8 bits too, and a float32 -> fp8 cast turned the value into an integer and stored
  it as the bits (1.0 became 0.00195, 127 NaN: ParallelKernelBench Triton-tree problem 19's quantiser and its
  reference agreed on NaNs, which PKB's comparison fails). Here fp8 decodes through torch's fp8 dtypes and
  encodes as Hopper's `cvt.rn.satfinite`: round to nearest even, saturating at the largest finite value,
  NaN kept.
"""
from __future__ import annotations

import numpy as np
import torch
import triton.language as tl
from triton.runtime import interpreter as interp


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) as float32 values: the same bits shifted into the high half (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to nearest even, as bfloat16 bits (uint16)."""
    rounded = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(torch.bfloat16)
    return rounded.view(torch.int16).numpy().view(np.uint16)


# Triton's 8-bit float types with a torch twin: (torch dtype, largest finite value)
_FP8 = ((tl.float8e4nv, torch.float8_e4m3fn, 448.0), (tl.float8e5, torch.float8_e5m2, 57344.0),
        (tl.float8e4b8, torch.float8_e4m3fnuz, 240.0), (tl.float8e5b16, torch.float8_e5m2fnuz, 57344.0))


def _fp8(ty):
    return next(((dt, top) for t, dt, top in _FP8 if t == ty), None)


def _to_f32(handle) -> np.ndarray:
    """A bf16, fp8 or other numeric handle's values as float32."""
    s = handle.dtype.scalar
    if s == tl.bfloat16:
        return _bf16_to_f32(handle.data)
    if _fp8(s):
        bits = torch.from_numpy(np.ascontiguousarray(handle.data).view(np.uint8))
        return bits.view(_fp8(s)[0]).float().numpy()
    return handle.data.astype(np.float32)


def _f32_to_fp8(values: np.ndarray, ty) -> np.ndarray:
    dt, top = _fp8(ty)
    clamped = torch.from_numpy(np.clip(np.ascontiguousarray(values, dtype=np.float32), -top, top))
    return clamped.to(dt).view(torch.uint8).numpy()


def make_dot(real):
    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar != tl.bfloat16 and b.dtype.scalar != tl.bfloat16:
            return real(self, a, b, d, input_precision, max_num_imprecise_acc)
        x, y = (_bf16_to_f32(h.data) if h.dtype.scalar == tl.bfloat16 else h.data.astype(np.float32) for h in (a, b))
        acc = np.matmul(x, y, dtype=np.float32)
        if d.dtype.scalar == tl.bfloat16:
            return interp.TensorHandle(_f32_to_bf16(acc + _bf16_to_f32(d.data)), tl.bfloat16)
        return interp.TensorHandle((acc + d.data).astype(d.data.dtype), d.dtype.scalar)
    return create_dot


def make_cast(real):
    def cast_impl(self, src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        if s == d or not any(t == tl.bfloat16 or _fp8(t) for t in (s, d)):
            return real(self, src, dst_type)
        values = _to_f32(src)
        if d == tl.bfloat16:
            return interp.TensorHandle(_f32_to_bf16(values), tl.bfloat16)
        if _fp8(d):
            return interp.TensorHandle(_f32_to_fp8(values, d), d)
        return interp.TensorHandle(values.astype(interp._get_np_dtype(dst_type)), d)
    return cast_impl


def make_fp_to_fp(real, cast):
    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        if rounding_mode == interp._ir.ROUNDING_MODE.RTZ:  # truncation asked for: the interpreter's own
            return real(self, src, dst_type, rounding_mode)
        return cast(self, src, dst_type)
    return create_fp_to_fp


def install_numerics(patches) -> None:
    builder = interp.InterpreterBuilder
    cast = make_cast(builder.cast_impl)
    patches.set(builder, "create_dot", make_dot(builder.create_dot))
    patches.set(builder, "cast_impl", cast)
    for name in ("create_fp_trunc", "create_fp_ext", "create_si_to_fp", "create_ui_to_fp", "create_fp_to_si",
                 "create_fp_to_ui"):
        patches.set(builder, name, lambda self, src, dst_type, _cast=cast: _cast(self, src, dst_type))
    patches.set(builder, "create_fp_to_fp", make_fp_to_fp(builder.create_fp_to_fp, cast))
