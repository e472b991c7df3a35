"""Which CUDA kernel path torch's TensorIterator takes for an elementwise op, from its tensors' dtypes and
strides: the vectorised kernel, or a slower one (pkbsim.timing.compute.PATH_ELEMENTS_PER_SM_US says how slow).
On an H200 a bf16 -> float32 copy takes twice a float32 -> bf16 one of the same bytes, and `x * weight` with a
broadcast weight 2.6x a contiguous multiply."""
from __future__ import annotations

import math

import torch

from pkbsim.standins.device_identity import tagged

_aten = torch.ops.aten
# copies that run as TensorIterator elementwise kernels on CUDA, as the pointwise-tagged ops do
_COPIES = {_aten.copy_, _aten._to_copy, _aten.clone, _aten.to}
# float32 -> bfloat16/float16: CUDA's copy has its own vectorised kernel for these (bfloat16_copy_kernel_cuda)
_VECTORISED_CASTS = {(torch.float32, torch.bfloat16), (torch.float32, torch.float16)}
# ops whose bool operand is a condition the functor takes as bool (not cast)
_CONDITIONS = {_aten.where, _aten.masked_fill, _aten.masked_fill_}
_ELEMENTWISE: dict = {}   # OpOverload -> None (not one TensorIterator elementwise kernel), else (copy?, conditions?)
THREADS = 128             # num_threads(): a block of torch's elementwise and scatter/gather kernels
_INT32_MAX = 2 ** 31 - 1


def _elementwise(func):
    kind = _ELEMENTWISE.get(func, False)
    if kind is False:
        packet = func.overloadpacket
        kind = _ELEMENTWISE[func] = (packet in _COPIES, packet in _CONDITIONS) \
            if packet in _COPIES or torch.Tag.pointwise in func.tags else None
    return kind


def _dense(t) -> bool:
    """No gaps and no overlaps: the strides of the dims of size > 1, sorted, are a contiguous layout's."""
    expected = 1
    for stride, size in sorted((st, n) for st, n in zip(t.stride(), t.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _dense_like(t, out) -> bool:
    """`t` is walked in the output's order with no gaps: contiguous, or laid out exactly as the output is and
    dense (TensorIterator reorders the dims of tensors permuted alike)."""
    if t.is_contiguous():
        return out is t or out.is_contiguous() or t.stride() == out.stride()
    return t.stride() == out.stride() and _dense(t)


def strided_layout(t) -> bool:
    """A strided tensor, the kind torch's CUDA kernels of these rules walk (not nested, not sparse)."""
    return not t.is_nested and t.layout == torch.strided


def _on_host(t) -> bool:
    """A tensor the program put on the host (device_identity tags it; a simulated GPU's tensors are CPU
    tensors too, untagged)."""
    dev = tagged(t)
    return dev is not None and dev.type == "cpu"


def kernel_path(func, reads, written) -> str | None:
    """The CUDA kernel path torch's TensorIterator takes for an elementwise op (None: the vectorised one,
    or not an elementwise op): "cast" where an input's dtype differs from the output's (the kernel loads
    with a dynamic cast, unrolled, not vectorised; a float32 -> bf16/fp16 copy is vectorised), "strided" where
    an operand is broadcast (stride 0) or not dense in the output's order (elementwise_kernel with offset
    calculators), "cast+strided" for both. A bool condition (where, masked_fill) is the functor's own type; a
    bool output (comparisons) takes its inputs' dtype as the reference. Nested and sparse tensors run other
    kernels: None."""
    kind = _elementwise(func)
    if kind is None or not written or not all(map(strided_layout, [*reads, *written])):
        return None
    out = written[0]
    n = out.numel()
    if n <= 1:
        return None
    copy, conds = kind
    ins = [t for t in reads if t is not out and not (t.dim() == 0 and _on_host(t))]   # a host scalar: an argument
    ref = out.dtype
    if ref == torch.bool:
        ref = next((t.dtype for t in ins if t.dtype != torch.bool), ref)
    cast = any(t.dtype != ref and not (conds and t.dtype == torch.bool) for t in ins)
    if cast and copy and len(ins) == 1 and (ins[0].dtype, out.dtype) in _VECTORISED_CASTS:
        cast = False
    strided = not _dense_like(out, out) or any(t.numel() != n or not _dense_like(t, out) for t in ins)
    return "cast+strided" if cast and strided else "cast" if cast else "strided" if strided else None


def byte_span(shape, strides, itemsize: int) -> int:
    """The furthest byte, from its start, of a view with this shape and these strides."""
    return (1 + sum((n - 1) * abs(st) for n, st in zip(shape, strides) if n > 0)) * itemsize


def splits(spans) -> int:
    """The kernels TensorIterator launches for an op whose operands reach these byte spans: where one lies
    past 2^31 - 1 (can_use_32bit_indexing), with_32bit_indexing halves the iteration until each part fits,
    a kernel each."""
    span = max(spans, default=0)
    return 1 << math.ceil(math.log2(span / _INT32_MAX)) if span > _INT32_MAX else 1


def _inner_steps(reads, out):
    """(operand, its step in elements) along the output's fastest dim, the one TensorIterator walks a warp's
    threads along, for each read operand the output's shape can be walked over (broadcast: step 0)."""
    dims = [d for d in range(out.dim()) if out.shape[d] > 1]
    if not dims:
        return
    inner = min(dims, key=lambda d: abs(out.stride(d)))
    for t in reads:
        if t is out or t.numel() <= 1:
            continue
        try:
            yield t, abs(t.expand(out.shape).stride(inner))
        except RuntimeError:   # not broadcastable to the output (an index, a mask of its own shape): left out
            continue


def scattered_reads(reads, out) -> int:
    """Elements the kernel reads one cache line each: those of an operand that steps 32 bytes or more (a
    sector) along the output's fastest dim (a transpose's source, a column); a broadcast operand (step 0) and
    a dense one share their lines across a warp."""
    return sum(out.numel() for t, step in _inner_steps(reads, out) if step * t.element_size() >= 32)


def overfetch(reads, out) -> int:
    """Bytes the sectors of operands that skip elements along the output's fastest dim bring from memory
    besides their elements' (every other column of a float32 matrix: 8 bytes a sector holds per element it
    reads; a column: a 32-byte sector an element). A run of contiguous elements (step 1: a head's 128 values of
    a fused qkv), a broadcast operand and a dense one (a transpose's source: other warps use the rest of its
    sectors, from the L2) fetch nothing unused."""
    extra = 0
    for t, step in _inner_steps(reads, out):
        if step > 1 and not _dense(t):
            extra += out.numel() * (min(step * t.element_size(), 32) - t.element_size())
    return extra


def path_launch(path: str, reads, written) -> dict:
    """How the kernel of an op on a slow `path` runs: the elements it writes, the steps a thread takes in
    sequence (elementwise_kernel<128, vt>: vt elements a thread, 2 for a 4-byte or wider output, else 4, 4
    with a cast; each step's store ends it, so its loads wait a round trip; the contiguous cast kernel,
    unrolled_elementwise_kernel, takes 4 elements a thread, each loaded and converted through a switch on its
    dtype before the next is loaded: on an H100 a warm 4096-element bf16 -> float32 copy took 2.21 us against
    1.15 for a one-element add; they bound a kernel of few blocks, the elements' rate a large one), the
    elements it reads a cache line each (scattered_reads), the bytes its sectors fetch unused (overfetch), and
    its splits. Fields of a trace record and of op_kernels.Launch (pkbsim.timing.compute.kernel_us)."""
    out = written[0]
    n = out.numel()
    k = splits(byte_span(t.shape, t.stride(), t.element_size()) for t in [*reads, *written])
    vt = 4 if "cast" in path or out.element_size() < 4 else 2
    steps = min(vt, math.ceil(n / k / THREADS))
    rec = {"path": path, "elements": n}
    lines = scattered_reads(reads, out)
    if lines:
        rec["lines"] = lines
    unused = overfetch(reads, out)
    if unused:
        rec["overfetch"] = unused
    if steps > 1:
        rec["steps"] = steps
    if k > 1:
        rec["splits"] = k
    return rec
