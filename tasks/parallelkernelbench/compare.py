"""ParallelKernelBench's own output comparison, so that a PKB problem is judged as its harness judges it.

PKB walks each rank's output recursively: dict keys must match, sequence lengths must match, tensor
shapes must match exactly, tensor values must satisfy `torch.allclose(ref.float(), out.float(), atol,
rtol)` (dtype is not compared; NaN fails; a complex tensor's `.float()` keeps the real part), and any
other leaf (None, int, torch.Size, str) must be `==`.

The values are compared a chunk at a time, on one thread, with torch.isclose's exact arithmetic: a whole
output's `.float()` copies and isclose's temporaries are several times its size (a 150 MB bfloat16 output
allocated 1.5 GB per comparison and took 1.5 s; the screen compares every rank's output of every call).
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any

import torch

ATOL = RTOL = 1e-2  # PKB's defaults (run_local.py and friends), the same for every problem
CHUNK = 1 << 18     # elements compared at a time (1 MiB of float32 per temporary: they stay in the cache)


def pkb_mismatch(out: Any, ref: Any, path: str, atol: float = ATOL, rtol: float = RTOL) -> str | None:
    """None if `out` matches `ref` the way PKB compares them, else where and how they first differ."""
    if isinstance(ref, dict) and isinstance(out, dict):
        if set(ref) != set(out):
            return (f"{path}: dict keys differ (only in the reference: {sorted(map(str, set(ref) - set(out)))}, "
                    f"only in the output: {sorted(map(str, set(out) - set(ref)))})")
        for k in ref:
            msg = pkb_mismatch(out[k], ref[k], f"{path}[{k!r}]", atol, rtol)
            if msg:
                return msg
        return None
    if isinstance(ref, (tuple, list)) and isinstance(out, (tuple, list)):
        if len(ref) != len(out):
            return f"{path}: sequence of length {len(out)}, expected {len(ref)}"
        for i, (o, r) in enumerate(zip(out, ref)):
            msg = pkb_mismatch(o, r, f"{path}[{i}]", atol, rtol)
            if msg:
                return msg
        return None
    if isinstance(ref, torch.Tensor) and isinstance(out, torch.Tensor):
        return _tensor_mismatch(out, ref, path, atol, rtol)
    try:
        same = bool(ref == out)
    except Exception as e:  # noqa: BLE001 - PKB reports a failed comparison as a mismatch
        return f"{path}: cannot compare {type(out).__name__} with the expected {type(ref).__name__} ({e})"
    return None if same else f"{path}: {_short(out)} != expected {_short(ref)}"


def _tensor_mismatch(out: torch.Tensor, ref: torch.Tensor, path: str, atol: float, rtol: float) -> str | None:
    if tuple(out.shape) != tuple(ref.shape):
        return f"{path}: shape {tuple(out.shape)} != expected {tuple(ref.shape)}"
    r, o = ref.detach().cpu(), out.detach().cpu()
    if r.layout != torch.strided or o.layout != torch.strided:
        r, o = r.to_dense(), o.to_dense()
    r, o = r.reshape(-1), o.reshape(-1)
    with warnings.catch_warnings(), _one_thread():
        warnings.simplefilter("ignore")  # complex -> real discards the imaginary part, as PKB's .float() does
        for start in range(0, r.numel(), CHUNK):
            rc, oc = r[start:start + CHUNK].float(), o[start:start + CHUNK].float()
            close = _isclose(rc, oc, atol, rtol)
            if not bool(close.all()):
                i = start + int((~close).nonzero()[0])
                bad = sum(int((~_isclose(r[s:s + CHUNK].float(), o[s:s + CHUNK].float(), atol, rtol)).sum())
                          for s in range(start, r.numel(), CHUNK))
                return (f"{path}: {bad} of {r.numel()} elements outside rtol={rtol:g} atol={atol:g} (first at flat "
                        f"index {i}: got {o[i].float().item():.6g}, expected {r[i].float().item():.6g})")
    return None


def _isclose(r: torch.Tensor, o: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """torch.isclose(r, o, rtol, atol) on float tensors, op for op as ATen computes it (isclose in
    TensorCompare.cpp): equal, or a finite |r - o| within atol + |rtol * o| (NaN is never close)."""
    err = (r - o).abs_()
    return (err <= (o * rtol).abs_().add_(atol)).logical_and_(err.isfinite()).logical_or_(r == o)


@contextlib.contextmanager
def _one_thread():
    """Chunks this small cost a thread pool more in synchronisation than they gain (on a loaded machine
    each op waits for a descheduled worker thread)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."
