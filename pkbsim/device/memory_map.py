"""Which symmetric allocation an address belongs to: a rank's buffer or its signal pad.

All ranks share one address space, so peer pointers are plain addresses; this map turns one back into
(owner rank, buffer or pad, byte offset). It is rebuilt when the set of allocations changes (an allocation,
a rendezvous, a release: pkbsim/symm/allocations.py). `check_mapped` is the device side's check that the
accessing rank still maps a region: an access through a stale address of a freed symmetric buffer is a
MemoryFault, as the GPU's illegal address.
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
        self._symm.reap()
        count = self._symm.generation
        if count == self._seen:
            return
        regions = []
        for alloc in list(self._symm.by_storage.values()):
            regions.append(Region(alloc, alloc.base, alloc.nbytes, False))
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

    def split(self, addrs: np.ndarray, width: int, bounds: tuple[int, int] | None = None
              ) -> list[tuple[Region | None, np.ndarray]]:
        """The addresses of one access grouped by the region holding them (None: not symmetric memory); `bounds`:
        their minimum and maximum, if known (a warp-group's are 32768 addresses)."""
        self._refresh()
        if not self._starts:
            return [(None, addrs)]
        if bounds is None and addrs.size:
            bounds = int(addrs.min()), int(addrs.max())
        first = bisect.bisect_right(self._starts, bounds[0]) - 1 if addrs.size else None
        if first is not None and bisect.bisect_right(self._starts, bounds[1]) - 1 == first:
            r = self._regions[first] if first >= 0 else None   # the common case, one region (or none) holds them all
            return [(r if r is not None and bounds[1] + width <= r.base + r.size else None, addrs)]
        idx = np.searchsorted(self._start_array, addrs, side="right").astype(np.int64) - 1
        groups = [(int(i), addrs[idx == i]) for i in np.unique(idx)]
        out = []
        for i, sub in groups:
            r = self._regions[i] if i >= 0 else None
            inside = r is not None and int(sub.max()) + width <= r.base + r.size
            out.append((r if inside else None, sub))
        return out


def check_mapped(region: Region | None, rank: int, addr: int) -> None:
    """Raise the GPU's illegal-address fault if `rank` no longer maps `region` (its symmetric allocation, or
    the rank's own of the same rendezvous, was freed); `addr` is the first address of the access."""
    if region is None:
        return
    by = region.alloc.unmapped_for(rank)
    if by is not None:
        from pkbsim.ptx.errors import MemoryFault
        from pkbsim.symm.allocations import freed_message
        raise MemoryFault(freed_message(region.alloc, by, rank, addr, region.on_pad))
