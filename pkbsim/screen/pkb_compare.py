"""ParallelKernelBench's own output comparison, so that a PKB problem is judged as its harness judges it.

PKB walks each rank's output recursively: dict keys must match, sequence lengths must match, tensor
shapes must match exactly, tensor values must satisfy `torch.allclose(ref.float(), out.float(), atol,
rtol)` (dtype is not compared; NaN fails; a complex tensor's `.float()` keeps the real part), and any
other leaf (None, int, torch.Size, str) must be `==`.
"""
from __future__ import annotations

import warnings
from typing import Any

import torch

ATOL = RTOL = 1e-2  # PKB's defaults (run_local.py and friends), the same for every problem


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex -> real discards the imaginary part, as PKB's .float() does
        r, o = ref.detach().cpu().float(), out.detach().cpu().float()
    if torch.allclose(r, o, atol=atol, rtol=rtol):
        return None
    bad = ~torch.isclose(r, o, atol=atol, rtol=rtol)
    i = int(bad.reshape(-1).nonzero()[0])
    return (f"{path}: {int(bad.sum())} of {r.numel()} elements outside rtol={rtol:g} atol={atol:g} (first at flat "
            f"index {i}: got {o.reshape(-1)[i].item():.6g}, expected {r.reshape(-1)[i].item():.6g})")


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."
