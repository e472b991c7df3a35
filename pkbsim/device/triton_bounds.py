"""Bounds of an interpreted Triton kernel's memory accesses.

Triton's interpreter loads and stores through raw host addresses. A block that runs past its tensor (a
64-row tile over a 1-row sequence, with no mask or boundary check) would read whatever the host heap holds
there, or write over it: the candidate's process then dies of SIGSEGV or a malloc abort, which the screen
can only call inconclusive. On a GPU the same access reads or overwrites another allocation, or faults
(compute-sanitizer's out-of-bounds error). So before the access is made, every active address must lie in a
symmetric buffer or pad (the device memory map), in the storage of one of the launch's tensor arguments, or
in the storage of any live tensor on a simulated GPU (a kernel may read one through a table of addresses),
or in a live allocation of the CUDA runtime stand-in where an extension loaded it; anything else is a
MemoryFault naming the kernel line, the address and the argument it ran past, as the PTX path does
(pkbsim/cuda/memory.py).
"""
from __future__ import annotations

import numpy as np

from pkbsim.device.protocol import device_state
from pkbsim.ptx.errors import MemoryFault
from pkbsim.world.sites import user_site


class Bounds:
    """The memory one launch may touch outside the symmetric map, as merged [start, end) spans. Built from
    the tensor arguments on the first access outside symmetric memory; every live GPU tensor is added at the
    first address outside them (once per launch: a kernel allocates nothing)."""

    def __init__(self, tensors: dict):
        self._args = tensors
        self._named: list[tuple[int, int, str]] | None = None
        self._starts = self._ends = np.zeros(0, dtype=np.uint64)
        self._scanned = False

    def _set(self, spans) -> None:
        merged: list[list[int]] = []
        for lo, hi in sorted(spans):
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        self._starts = np.asarray([m[0] for m in merged], dtype=np.uint64)
        self._ends = np.asarray([m[1] for m in merged], dtype=np.uint64)

    def _spans(self) -> list[tuple[int, int]]:
        return list(zip(self._starts.tolist(), self._ends.tolist()))

    def _outside(self, addrs: np.ndarray, width: int) -> np.ndarray:
        """The addresses whose `width` bytes are not all inside one span."""
        if not self._starts.size:
            return addrs
        i = np.searchsorted(self._starts, addrs, side="right").astype(np.int64) - 1
        ok = i >= 0
        ends = self._ends[np.maximum(i, 0)]
        ok &= addrs + np.uint64(width) <= ends
        return addrs[~ok]

    def check(self, ctx, addrs: np.ndarray, width: int, what: str) -> None:
        """Raise a MemoryFault unless every access of `width` bytes at `addrs` stays in memory the kernel may touch."""
        if self._named is None:
            self._named = []
            for name, t in self._args.items():
                try:
                    st = t.untyped_storage()
                except (RuntimeError, NotImplementedError):
                    continue
                if st.device.type == "cpu" and st.nbytes():
                    self._named.append((st.data_ptr(), st.data_ptr() + st.nbytes(), name))
            self._set([(lo, hi) for lo, hi, _ in self._named])
        addrs = addrs.astype(np.uint64, copy=False)
        lo, hi = int(addrs.min()), int(addrs.max()) + width
        i = int(np.searchsorted(self._starts, np.uint64(lo), side="right")) - 1
        if i >= 0 and hi <= int(self._ends[i]):
            return  # the common case: one argument (or known tensor) holds the whole access
        bad = self._outside(addrs, width)
        bad = _outside_symmetric(ctx, bad, width)
        if bad.size and not self._scanned:
            self._scanned = True
            self._set(self._spans() + _live_device_spans())
            bad = self._outside(bad, width)
        bad = _outside_runtime_allocations(self, bad, width)
        if bad.size:
            raise MemoryFault(self._message(int(bad.min()), width, what))

    def _message(self, addr: int, width: int, what: str) -> str:
        below = [(lo, hi, n) for lo, hi, n in self._named or [] if lo <= addr]
        if below:
            lo, hi, name = max(below)
            near = f"{addr - hi} bytes past the end of argument {name} ({hi - lo} bytes)"
        else:
            near = "below every tensor argument"
        return (f"illegal memory access (out of bounds): a {what} of {width} bytes at address 0x{addr:x}, "
                f"{near}, outside every live tensor, at {user_site()} (on a GPU it reads or overwrites another "
                "allocation, or faults; mask the access or give the block pointer a boundary_check)")

    def add(self, lo: int, hi: int) -> None:
        self._set(self._spans() + [(lo, hi)])


def _outside_symmetric(ctx, addrs: np.ndarray, width: int) -> np.ndarray:
    if not addrs.size:
        return addrs
    groups = device_state(ctx.world).memory.split(addrs, width)
    left = [sub for region, sub in groups if region is None]
    return np.concatenate(left) if left else addrs[:0]


def _live_device_spans() -> list[tuple[int, int]]:
    from pkbsim.cuda.memory import _device_storages  # the PTX path's scan of live GPU tensors
    return [(base, base + size) for base, size in _device_storages()]


def _outside_runtime_allocations(bounds: Bounds, addrs: np.ndarray, width: int, tries: int = 16) -> np.ndarray:
    """Drop the addresses inside live allocations of the CUDA runtime stand-in, if an extension loaded it
    (loading it here would build it, for a kernel that may never touch it)."""
    from pkbsim.cuda import runtime_libs
    if runtime_libs._loaded is None:
        return addrs
    for _ in range(tries):
        if not addrs.size:
            break
        hit = runtime_libs.find_allocation(int(addrs.min()))
        if hit is None:
            break
        bounds.add(hit[0], hit[0] + hit[1])
        addrs = bounds._outside(addrs, width)
    return addrs
