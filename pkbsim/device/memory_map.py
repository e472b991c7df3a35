"""Which symmetric allocation an address belongs to: a rank's buffer or its signal pad.

All ranks share one address space, so peer pointers are plain addresses; this map turns one back into
(owner rank, buffer or pad, byte offset). It is rebuilt when the set of allocations changes.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pkbsim.symm.allocations import Allocation, SymmState


@dataclass(frozen=True, slots=True)
class Region:
    alloc: Allocation
    base: int
    size: int
    on_pad: bool

    @property
    def owner(self) -> int:
        return self.alloc.rank


class MemoryMap:
    def __init__(self, symm: SymmState):
        self._symm = symm
        self._seen = -1
        self._starts: list[int] = []
        self._regions: list[Region] = []

    def _refresh(self) -> None:
        count = len(self._symm.by_storage) + len(self._symm.by_pad)
        if count == self._seen:
            return
        regions = []
        for alloc in list(self._symm.by_storage.values()):
            st = alloc.tensor.untyped_storage()
            regions.append(Region(alloc, st.data_ptr(), st.nbytes(), False))
            regions.append(Region(alloc, alloc.pad.data_ptr(), alloc.pad.numel() * 4, True))
        regions.sort(key=lambda r: r.base)
        self._regions, self._starts, self._seen = regions, [r.base for r in regions], count
        self._start_array = np.asarray(self._starts, dtype=np.uint64)

    def find(self, lo: int, hi: int) -> Region | None:
        """The region holding bytes [lo, hi), or None for memory that is not symmetric."""
        self._refresh()
        i = bisect.bisect_right(self._starts, lo) - 1
        if i < 0:
            return None
        r = self._regions[i]
        return r if hi <= r.base + r.size else None

    def split(self, addrs: np.ndarray, width: int) -> list[tuple[Region | None, np.ndarray]]:
        """The addresses of one access grouped by the region holding them (None: not symmetric memory)."""
        self._refresh()
        if not self._starts:
            return [(None, addrs)]
        idx = np.searchsorted(self._start_array, addrs, side="right").astype(np.int64) - 1
        if idx.size and (idx == idx[0]).all():   # the common case: one region (or none) holds them all
            groups = [(int(idx[0]), addrs)]
        else:
            groups = [(int(i), addrs[idx == i]) for i in np.unique(idx)]
        out = []
        for i, sub in groups:
            r = self._regions[i] if i >= 0 else None
            inside = r is not None and int(sub.max()) + width <= r.base + r.size
            out.append((r if inside else None, sub))
        return out
