"""Call sites: the user's file:line for an operation, skipping torch, pkb and stdlib plumbing."""
from __future__ import annotations

import os
import sys

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EXAMPLES = os.path.join(_PKG_ROOT, "examples")
_SKIP_PARTS = (
    os.sep + "torch" + os.sep,
    os.sep + "triton" + os.sep,
    "typing_extensions.py",
    os.sep + "functools.py",
    os.sep + "contextlib.py",
    os.sep + "threading.py",
    os.sep + "runpy.py",
)


_plumbing_cache: dict[str, bool] = {}


def _is_plumbing(filename: str) -> bool:
    hit = _plumbing_cache.get(filename)
    if hit is None:
        hit = (filename.startswith(_PKG_ROOT) and not filename.startswith(_EXAMPLES)) or \
            any(p in filename for p in _SKIP_PARTS) or filename.startswith("<")
        _plumbing_cache[filename] = hit
    return hit


def user_site(depth: int = 1) -> str:
    """Return 'file.py:LINE' of the innermost frame that belongs to the user's program."""
    frame = sys._getframe(depth)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_plumbing(filename):
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def user_stack(frame, limit: int = 6) -> list[str]:
    """The user's frames of a (possibly foreign) thread's stack, innermost first."""
    out = []
    while frame is not None and len(out) < limit:
        filename = frame.f_code.co_filename
        if not _is_plumbing(filename):
            out.append(f"{os.path.basename(filename)}:{frame.f_lineno} in {frame.f_code.co_name}")
        frame = frame.f_back
    return out
