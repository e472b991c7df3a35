"""The kernels a CUDA build of torch launches for one aten op where that is not one pass over the op's
operands (op_bytes.traffic charges every other op as one). Each rule restates what torch's CUDA code does,
not a fitted factor; the launches are then timed like any op (pkbsim.timing.compute.op_us), each at least
the kernel floor. The solutions' ops measured on an H200, where one pass was predicted, showed the need for
each rule; those measurements are in docs/timing_model_log.md#from-the-docstrings.

- a reduction whose input dtype is not its output's casts a copy first (ReduceOpsUtils.h make_reduction:
  `self.to(in_dtype)`; half/bf16 -> float32 is exempt): `mask.sum()` of a bool mask writes an int64 copy
  and reduces that;
- `logsumexp` is amax, a fix-up of infinite maxima on the result, `(x - max).exp_()`, sum, log_, add_
  (ReduceOps.cpp logsumexp_out_impl): nine kernels, four passes over x plus a write of two;
- `_softmax` / `_log_softmax` over the last dim of rows too long for registers or 48 KiB of shared memory
  run cunn_SoftMaxForward, which reads a row three times (max, sum of exp, output) (SoftMax.cu);
- layer norm and RMS norm (vectorized_layer_norm_kernel) read a row for its statistics and again to
  normalise it;
- an out-of-place `masked_fill` clones, then fills in place (TensorCompare.cpp);
- `cat` of a non-contiguous input runs the generic CatArrayBatchedCopy with per-element index arithmetic:
  charged as an elementwise op on the strided path;
- softmax and the norms take a contiguous input (`input.contiguous()`): a strided one is copied first;
- gather and scatter (_scatter_gather_elementwise_kernel) take up to 8 elements a thread one after another,
  its index then its value (a scatter's source, loaded once the index is checked) a round trip each, so a
  small one waits on round trips; an operand past 2^31 - 1 bytes of offsets splits it into several kernels;
- triu and tril compute each element's row and column (triu_tril_kernel): charged as the strided path;
- a reduction runs reduce_kernel, whose floor is its own (compute.REDUCE_FLOOR_EXTRA_US), and one whose
  reduced dims all have size 1 (a sum over the stack of a world of one) takes one input an output at the
  slow paths' element rate.
A row read again comes from the L2 while the rows resident on all SMs fit it, from HBM when they do not
(the L2 side is not yet measured).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from pkbsim.timing.kernel_path import THREADS, byte_span, path_launch, splits, strided_layout
from pkbsim.timing.op_bytes import tensor_bytes

_aten = torch.ops.aten
_CASTING_REDUCTIONS = {_aten.sum, _aten.nansum, _aten.prod, _aten.mean}
_LOWP = {torch.float16, torch.bfloat16}
_SOFTMAXES = {_aten._softmax, _aten._log_softmax}
# ops CUDA runs as _scatter_gather_elementwise_kernel, each element two round trips one after the other: its
# index, then (the index checked against the dim's size first) a gather's value or a scatter's source
_SCATTER_GATHER = {_aten.gather, _aten.scatter, _aten.scatter_, _aten.scatter_add, _aten.scatter_add_}
SCATTER_GATHER_VT = 8   # thread_work_size(): elements a thread of _scatter_gather_elementwise_kernel<128, 8> takes
_TRIANGLES = {_aten.triu, _aten.tril}
# ops CUDA runs as torch's reduce_kernel (Reduce.cuh), whose floor is its own (pkbsim.timing.compute)
_REDUCTIONS = _CASTING_REDUCTIONS | {_aten.amax, _aten.amin, _aten.any, _aten.all, _aten.linalg_vector_norm}
_RULED = _REDUCTIONS | _SOFTMAXES | set(_SCATTER_GATHER) | _TRIANGLES | {
    _aten.cat, _aten.logsumexp, _aten.native_layer_norm, _aten.masked_fill}
SHARED_MEM_PER_BLOCK = 48 * 1024   # cudaDeviceProp.sharedMemPerBlock, what SoftMax.cu sizes its rows against


@dataclass(frozen=True)
class Launch:
    """One kernel of an op: the bytes it reads and writes; its elementwise path (kernel_path) with the
    elements it writes (a slow path's time goes by them); the bytes it reads again (`reread`) of rows spanning
    `span` bytes while each SM keeps `resident` bytes of them live between the reads (from the L2 while the
    live rows, all SMs', at most all rows, fit it, else from HBM); the memory round trips a thread makes one
    after another (`steps`) and the kernels torch splits it into (`splits`); the kernel's family where its
    floor is not the elementwise one (`kernel`: "reduce"); the elements it reads a cache line each (`lines`,
    kernel_path.scattered_reads) and the bytes its sectors fetch unused (`overfetch`). pkbsim.timing.compute times
    it, per GPU."""
    read: int
    written: int
    path: str | None = None
    elements: int = 0
    reread: int = 0
    resident: int = 0
    span: int = 0
    steps: int = 1
    splits: int = 1
    kernel: str | None = None
    lines: int = 0
    overfetch: int = 0

    def record(self) -> dict:
        out = {"read": self.read, "written": self.written}
        if self.kernel:
            out["kernel"] = self.kernel
        if self.path:
            out.update(path=self.path, elements=self.elements)
        if self.lines:
            out["lines"] = self.lines
        if self.overfetch:
            out["overfetch"] = self.overfetch
        if self.steps > 1:
            out["steps"] = self.steps
        if self.splits > 1:
            out["splits"] = self.splits
        if self.reread:
            out.update(reread=self.reread, resident=self.resident, span=self.span)
        return out


def _never_raises(rule):
    """A rule that cannot read an operand leaves the op one kernel: never the simulated program's error."""
    @functools.wraps(rule)
    def guarded(*args):
        try:
            return rule(*args)
        except Exception:
            return None
    return guarded


@_never_raises
def launches(func, args, written: list, moved: tuple[int, int]) -> list[Launch] | None:
    """The kernels `func` launches on CUDA, where they are not one elementwise pass over `moved`
    (op_bytes.traffic's (read, written)): several kernels or passes, or one whose floor is not the elementwise
    one (a reduction); None where one elementwise kernel moving `moved` is what runs, or for tensors these
    rules do not describe (nested, sparse, empty). Called for every traced op: others leave at the first test."""
    packet = func.overloadpacket
    if packet not in _RULED or not written or not args:
        return None
    if packet in _SCATTER_GATHER:
        return _scatter_gather(args, written, packet is _aten.gather, moved)
    if packet in _TRIANGLES:   # triu_tril_kernel: each element's row and column by 64-bit division
        return [Launch(*moved, **path_launch("strided", [args[0]], written))]
    if packet is _aten.cat:
        strided = any(t.layout == torch.strided and t.numel() and not t.is_contiguous() for t in args[0])
        return [Launch(*moved, **path_launch("strided", list(args[0]), written))] if strided else None
    x, out = args[0], written[0]
    if not isinstance(x, torch.Tensor) or not strided_layout(x) or not x.numel():
        return None
    if packet in _CASTING_REDUCTIONS and x.dtype != out.dtype and not x.is_complex() \
            and not (x.dtype in _LOWP and out.dtype == torch.float32):
        copy = x.numel() * out.element_size()
        return [Launch(tensor_bytes(x), copy, **path_launch("cast", [x], [x])),
                _reduce(x.numel(), out.numel(), copy, tensor_bytes(out))]
    if packet in _REDUCTIONS:
        return [_reduce(x.numel(), out.numel(), *moved)]
    if packet is _aten.logsumexp and x.is_floating_point():
        return _logsumexp(x, out)
    if packet in _SOFTMAXES:
        rows = _softmax_row(x, args[1])
        if rows is None or not _softmax_rereads(rows, x):
            return _contiguous(x, [Launch(*moved)]) if not x.is_contiguous() else None
        # cunn_SoftMaxForward: 1024-thread blocks, 2 rows an SM
        return _contiguous(x, [Launch(*moved, reread=2 * tensor_bytes(x), resident=2 * rows * x.element_size(),
                                      span=tensor_bytes(x))])
    if packet is _aten.native_layer_norm:
        return _norm(x, args[1], moved)
    if packet is _aten.masked_fill and x.numel() == out.numel():
        mask = args[1]
        o = tensor_bytes(out)
        return [Launch(tensor_bytes(x), o, **_strided_if(not x.is_contiguous(), [x], [out])),
                Launch(o + tensor_bytes(mask), o, **_strided_if(mask.numel() != out.numel(), [mask, out], [out]))]
    return None


@_never_raises
def fused_launches(name: str, args: list, reads: list, out: list) -> list[Launch] | None:
    """The kernels of a call the CUDA build runs fused (fused_calls.py; `args` as the program passed them):
    RMS norm (input, normalized_shape, ...) reads its input twice."""
    if name != "rms_norm" or not reads or not out or len(args) < 2:
        return None
    x = reads[0]
    if not strided_layout(x) or not x.numel():
        return None
    return _norm(x, args[1], (sum(tensor_bytes(t) for t in reads), sum(tensor_bytes(t) for t in out)))


def _scatter_gather(args, written: list, gather: bool, moved: tuple[int, int]) -> list[Launch] | None:
    """_scatter_gather_elementwise_kernel: 128 threads a block, each taking up to 8 of the index's elements
    one after another (the store through a computed address ends each), every element two round trips.
    Its iteration has the index's shape over the operands' strides, the indexed tensor's (a scatter's self,
    a gather's input) with the indexed dim's stride zeroed (ScatterGatherKernel.cu)."""
    x, dim, index = args[0], args[1], args[2]
    if not isinstance(index, torch.Tensor) or not index.numel() or not index.dim():
        return None
    other = written[0] if gather else args[3] if len(args) > 3 and isinstance(args[3], torch.Tensor) else None
    indexed = list(x.stride())
    indexed[dim % index.dim()] = 0
    spans = [byte_span(index.shape, indexed, x.element_size()),
             byte_span(index.shape, index.stride(), index.element_size())]
    if other is not None and other.dim() == index.dim():
        spans.append(byte_span(index.shape, other.stride(), other.element_size()))
    k = splits(spans)
    per_thread = min(SCATTER_GATHER_VT, math.ceil(index.numel() / k / THREADS))
    return [Launch(*moved, steps=2 * per_thread, splits=k)]


def _reduce(inputs: int, outputs: int, read: int, written: int) -> Launch:
    """A reduce_kernel launch. Where every reduced dim has size 1 (one input an output), TensorIterator keeps no
    reduced dim and setReduceConfig maps the threads to the outputs, four a thread, each thread's loads then
    its stores one by one through computed offsets: it goes at the slow elementwise paths' element rate."""
    one = inputs == outputs > 1
    return Launch(read, written, kernel="reduce", **({"path": "reduce", "elements": outputs} if one else {}))


def _strided_if(strided: bool, reads, written) -> dict:
    """Launch fields of a kernel that takes the strided path where `strided` (kernel_path.path_launch)."""
    return path_launch("strided", reads, written) if strided else {}


def _contiguous(x, kernels: list[Launch]) -> list[Launch]:
    """A kernel that needs a contiguous input (`input.contiguous()`, `expect_contiguous()`) copies a strided
    one first."""
    return kernels if x.is_contiguous() else [Launch(tensor_bytes(x), tensor_bytes(x),
                                                     **path_launch("strided", [x], [x])), *kernels]


def _norm(x, normalized_shape, moved: tuple[int, int]) -> list[Launch]:
    """vectorized_layer_norm_kernel: a block of 128 threads a row (the normalized dims), 16 resident an SM,
    reads its row for the statistics and again to normalise it."""
    row = math.prod(normalized_shape) * x.element_size()
    return _contiguous(x, [Launch(*moved, reread=tensor_bytes(x), resident=16 * row, span=tensor_bytes(x))])


def _logsumexp(x, out) -> list[Launch]:
    n, o, r, e = tensor_bytes(x), tensor_bytes(out), out.numel(), x.element_size()
    big = r != x.numel()   # x - max broadcasts the maxima
    flag = r   # the bool mask of infinite maxima
    return [_reduce(x.numel(), r, n, r * e),                   # amax
            Launch(r * e, r * e), Launch(r * e, flag),         # abs, == inf
            Launch(r * e + flag, r * e),                       # masked_fill_
            Launch(n + r * e, n, **_strided_if(big, [x, out], [x])), Launch(n, n),  # x - max, exp_
            _reduce(x.numel(), r, n, o),                       # sum
            Launch(o, o), Launch(2 * o, o)]                    # log_, add_


def _softmax_row(x, dim: int) -> int | None:
    """The softmax's row length where torch takes its inner-size-1 path (the dims after `dim` all of size
    1), else None (the spatial kernel)."""
    if x.dim() == 0:
        return None
    d = dim % x.dim()
    return x.shape[d] if math.prod(x.shape[d + 1:]) == 1 else None


def _softmax_rereads(size: int, x) -> bool:
    """cunn_SoftMaxForward's path (SoftMax.cu host_softmax) for rows of `size` elements of x's dtype: not the
    warp kernel (rows of at most 2048 elements and 8 KiB), not the register kernel (fewer than 10 elements a
    thread of a 1024-thread block), not the shared-memory one (the row fits 48 KiB less the reduction's
    words, a multiple of a 16-byte vector)."""
    e = x.element_size()
    if size <= 2048 and size * e <= 8192:
        return False
    block = min(size, 1024)
    block = -(-block // 32) * 32
    if -(-size // block) < 10:
        return False
    acc = 4 if x.dtype in _LOWP or x.dtype == torch.float32 else e
    fits = size < (SHARED_MEM_PER_BLOCK - block // 32 * acc) // e and size % max(16 // e, 1) == 0
    return not fits
