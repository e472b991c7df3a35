"""What a failure's text says it was: shared by the worker (an exception it caught) and the scorer (the
log of a rank that died before it could report, e.g. when NCCL's watchdog aborts the process on an
asynchronous CUDA error)."""
from __future__ import annotations

_CUDA_MARKS = ("cuda error", "cuda failure", "device-side assert", "illegal memory access")


def is_cuda_error(text: str) -> bool:
    low = text.lower()
    return any(k in low for k in _CUDA_MARKS)


def cuda_error_line(log: str) -> str | None:
    """The first line of a log that reports a CUDA error, trimmed, or None."""
    for line in log.splitlines():
        if is_cuda_error(line):
            return line.strip()[:300]
    return None
