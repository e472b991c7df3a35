"""Byte sizes as nccl-tests and people write them, and the bus-bandwidth factors nccl-tests reports with."""
from __future__ import annotations

import re

# nccl-tests reads K/M/G as powers of 1024 (`-b 8 -e 128M`); KiB/MiB are the same; KB/MB/GB are decimal.
_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """'64MiB', '64M' (nccl-tests: binary), '1.5GB' (decimal), '4096' -> bytes. Raises ValueError."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise ValueError(f"cannot read size {text!r}; write e.g. 4096, 64K, 64MiB or 1GB")
    return round(float(m.group(1)) * _UNITS[unit])


def format_size(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes:g}B"


def bus_factor(op: str, nranks: int) -> float:
    """busBW = algBW * factor, as nccl-tests doc/PERFORMANCE.md defines it (so numbers compare across n)."""
    n = nranks
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0
