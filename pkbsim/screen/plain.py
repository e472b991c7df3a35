"""What crosses from the candidate's process to the screen's: plain data, built alike on both sides.

The child hands its outputs back as `plain(...)` (isolation.py reads them with `weights_only=True`), and the
parent applies the same to the reference's outputs, so that both sides are compared alike (functional.py).
"""
from __future__ import annotations

import torch


def plain(x):
    """`x` as data that crosses processes as itself (tensors, None, numbers, strings, torch.Size, dtypes and
    containers of them); any other object becomes its type's name. Applied to the reference's outputs too,
    so that both sides are compared alike."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        return t if type(t) is torch.Tensor else f"<{type(x).__name__}>"
    if x is None or isinstance(x, (bool, int, float, str, torch.Size, torch.dtype)):
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(plain(y) for y in x) if type(x) in (list, tuple) else [plain(y) for y in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()} if all(isinstance(k, (str, int)) for k in x) \
            else f"<{type(x).__name__}>"
    return f"<{type(x).__name__}>"
