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
- arithmetic on bf16 values (`a * b`, `x * 2`, `tl.exp(x)`, `tl.maximum`, comparisons) ran on the raw bits:
  a bf16 doubled by a Triton kernel came out as 1.7e38 (a candidate would be blamed for a wrong output), and a
  bf16 constant needed the builder's `get_bf16`, which the interpreter lacks (an AttributeError: HEAD's
  reference 19 ended inconclusive). Here each bf16 operation computes on the float32 values and rounds the
  result to bf16 (nearest even), as the GPU's bf16 instructions do; a fused multiply-add rounds once.
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


def get_bf16(self, value):
    return interp.TensorHandle(_f32_to_bf16(np.array([value], dtype=np.float32)), tl.bfloat16)


def _is_bf16(*handles) -> bool:
    return any(h.dtype.scalar == tl.bfloat16 for h in handles)


def _as_f32(handle):
    return interp.TensorHandle(_bf16_to_f32(handle.data), tl.float32) if _is_bf16(handle) else handle


def make_binary_op(real):
    def binary_op(self, lhs, rhs, op):
        if not _is_bf16(lhs, rhs):
            return real(self, lhs, rhs, op)
        values = op(_as_f32(lhs).data, _as_f32(rhs).data)
        # a comparison's truth values are kept in the operands' type, as the interpreter keeps them: 1.0 or 0.0
        return interp.TensorHandle(_f32_to_bf16(values.astype(np.float32)), tl.bfloat16)
    return binary_op


def make_unary_op(real):
    def unary_op(self, arg, op):
        if not _is_bf16(arg):
            return real(self, arg, op)
        return interp.TensorHandle(_f32_to_bf16(op(_bf16_to_f32(arg.data))), tl.bfloat16)
    return unary_op


def make_via_f32(real):
    """An operation on bf16 arguments computed on their float32 values, its result rounded once to bf16."""
    def op(self, *args, **kwargs):
        handles = [a for a in args if isinstance(a, interp.TensorHandle)]
        if not _is_bf16(*handles):
            return real(self, *args, **kwargs)
        out = real(self, *(_as_f32(a) if isinstance(a, interp.TensorHandle) else a for a in args), **kwargs)
        return interp.TensorHandle(_f32_to_bf16(out.data.astype(np.float32)), tl.bfloat16)
    return op


def install_numerics(patches) -> None:
    builder = interp.InterpreterBuilder
    patches.set(builder, "get_bf16", get_bf16)
    patches.set(builder, "binary_op", make_binary_op(builder.binary_op))
    patches.set(builder, "unary_op", make_unary_op(builder.unary_op))
    for name in ("create_fma", "create_rsqrt", "create_erf", "create_clampf"):
        patches.set(builder, name, make_via_f32(getattr(builder, name)))
    cast = make_cast(builder.cast_impl)
    patches.set(builder, "create_dot", make_dot(builder.create_dot))
    patches.set(builder, "cast_impl", cast)
    for name in ("create_fp_trunc", "create_fp_ext", "create_si_to_fp", "create_ui_to_fp", "create_fp_to_si",
                 "create_fp_to_ui"):
        patches.set(builder, name, lambda self, src, dst_type, _cast=cast: _cast(self, src, dst_type))
    patches.set(builder, "create_fp_to_fp", make_fp_to_fp(builder.create_fp_to_fp, cast))
