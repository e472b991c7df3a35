"""Memory spaces behind one small interface: regions mapped into an address space.

Global memory is the process's real address space: a torch CPU tensor is reached at its own
`data_ptr()`, so pointers a program computes (including peer pointers that the multi-rank world hands
out) resolve without translation. An `AddressSpace` holds pluggable `Region`s; the multi-rank world
adds one per rank's tensors, peer symmetric buffers and signal pads, and `MulticastRegion`s that fan a
multimem access out to every member. Shared and local memory are small per-CTA windows; generic
addresses above `SHARED_WINDOW` / `LOCAL_WINDOW` fall into them (real user-space pointers are < 2**47).
A kernel parameter's address (`mov` of its name, as nvcc emits for a struct parameter indexed at run
time) lies in `PARAM_WINDOW`: the parameter buffer, read-only.
"""
from __future__ import annotations

import bisect
import ctypes

import numpy as np

from .errors import MemoryFault

SHARED_WINDOW = 1 << 60
LOCAL_WINDOW = 1 << 61
PARAM_WINDOW = 3 << 60
WINDOW_MASK = (1 << 60) - 1


class Region:
    """A contiguous byte range at `base`, backed by a writable uint8 numpy array."""

    def __init__(self, base: int, data: np.ndarray, name: str = "", owner=None):
        self.base, self.data, self.name, self.owner = base, data, name, owner
        self.size = data.nbytes
        self._views: dict = {}

    def view(self, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        v = self._views.get(dtype)
        if v is None:
            usable = self.size - self.size % dtype.itemsize
            v = self._views[dtype] = self.data[:usable].view(dtype)
        return v

    @classmethod
    def of_tensor(cls, tensor, name: str = "") -> Region:
        """The whole storage of a CPU tensor (views and offsets into it resolve too)."""
        storage = tensor.untyped_storage()
        ptr, nbytes = storage.data_ptr(), storage.nbytes()
        raw = (ctypes.c_uint8 * max(nbytes, 1)).from_address(ptr) if nbytes else bytearray(1)
        return cls(ptr, np.frombuffer(raw, dtype=np.uint8)[:nbytes], name, owner=tensor)

    @classmethod
    def of_array(cls, data: np.ndarray, name: str = "") -> Region:
        """A numpy buffer at its own address (module globals, constants)."""
        return cls(data.ctypes.data, data.view(np.uint8).reshape(-1), name, owner=data)


class MulticastRegion:
    """A multimem address range: every access applies to the same offset in each member region."""

    def __init__(self, base: int, size: int, members: list[Region], name: str = "multicast"):
        self.base, self.size, self.members, self.name = base, size, members, name


class AddressSpace:
    """Non-overlapping regions looked up by address; the last hit is tried first."""

    def __init__(self):
        self._bases: list[int] = []
        self._regions: list = []
        self._last = None

    def add(self, region) -> None:
        i = bisect.bisect_right(self._bases, region.base)
        prev = self._regions[i - 1] if i else None
        if prev is not None and prev.base + prev.size > region.base:
            if prev.base == region.base and prev.size >= region.size:
                return  # the same storage mapped twice (two views of one tensor)
            raise MemoryFault(f"region {region.name} overlaps {prev.name}")
        if i < len(self._regions) and region.base + region.size > self._bases[i]:
            raise MemoryFault(f"region {region.name} overlaps {self._regions[i].name}")
        self._bases.insert(i, region.base)
        self._regions.insert(i, region)

    @property
    def regions(self) -> list:
        return list(self._regions)

    def remove(self, region) -> None:
        i = self._regions.index(region)
        del self._bases[i], self._regions[i]
        self._last = None

    def find(self, addr: int):
        i = bisect.bisect_right(self._bases, addr) - 1
        if i >= 0 and addr < self._bases[i] + self._regions[i].size:
            return self._regions[i]
        return None

    def resolve(self, addrs: np.ndarray, width: int):
        """(region, byte offsets) for a gather of `width`-byte items; all lanes must hit one region."""
        lo, hi = int(addrs.min()), int(addrs.max())
        r = self._last
        if r is None or lo < r.base or hi + width > r.base + r.size:
            r = self.find(lo)
            if r is None or hi + width > r.base + r.size:
                bad = lo if r is None else hi
                raise MemoryFault(f"address 0x{bad:x} is outside every mapped buffer "
                                  "(out-of-bounds index or a pointer the kernel was not given)")
            self._last = r
        return r, addrs - np.uint64(r.base)

    def split(self, addrs: np.ndarray, width: int) -> list:
        """[(lane selection, region, byte offsets)] for a gather whose lanes fall in several regions
        (a warp whose lanes each touch another peer's buffer)."""
        parts, todo = [], np.ones(len(addrs), bool)
        while todo.any():
            first = int(addrs[todo][0])
            r = self.find(first)
            if r is None:
                raise MemoryFault(f"address 0x{first:x} is outside every mapped buffer "
                                  "(out-of-bounds index or a pointer the kernel was not given)")
            sel = todo & (addrs >= np.uint64(r.base)) & (addrs < np.uint64(r.base + r.size))
            if int(addrs[sel].max()) + width > r.base + r.size:
                raise MemoryFault(f"address 0x{int(addrs[sel].max()):x} runs past the end of {r.name or 'a buffer'}")
            parts.append((sel, r, addrs[sel] - np.uint64(r.base)))
            todo &= ~sel
        return parts


def gather(region, offsets: np.ndarray, dtype) -> np.ndarray:
    """Load items of `dtype` at byte offsets from a region (alignment checked, as on the GPU)."""
    dtype = np.dtype(dtype)
    return region.view(dtype)[_items(region, offsets, dtype.itemsize)]


def scatter(region, offsets: np.ndarray, dtype, values) -> None:
    dtype = np.dtype(dtype)
    region.view(dtype)[_items(region, offsets, dtype.itemsize)] = values


def _items(region, offsets, isz: int):
    """Item indices of byte offsets into `region` (a misaligned one faults). Offsets within a region are far below
    2**63: they index as int64, which numpy takes without a converting copy, and a power-of-two size shifts (a
    uint64 division costs several times more). An offset with the top bit set keeps the unsigned path, so it
    still fails as out of range instead of wrapping round as a negative index."""
    offsets = np.asarray(offsets, np.uint64)
    bits = int(np.bitwise_or.reduce(offsets, axis=None))
    if isz > 1 and (bits | region.base) % isz:
        raise MemoryFault(f"misaligned {isz}-byte access in {region.name or 'memory'}")
    if bits >> 63 or isz & (isz - 1):
        return offsets // np.uint64(isz)
    return (offsets >> np.uint64(isz.bit_length() - 1)).view(np.int64)
