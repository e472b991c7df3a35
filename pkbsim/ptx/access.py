"""Lane-vector loads and stores in every state space (global, shared, local, param, const, generic).

`load`/`store` take the addresses of the active lanes only, so inactive lanes never fault. Generic
addresses are split into the global, shared, local and parameter windows (see memory.py). Every access
must be aligned to its full size (a vector's too), as on the GPU, where anything else is a fault.
"""
from __future__ import annotations

import numpy as np

from .errors import MemoryFault, NotSimulated
from .memory import WINDOW_MASK, MulticastRegion, Region, gather, scatter

SPACES = ("global", "shared", "local", "param", "const")
GENERIC_WINDOWS = [(0, "global"), (1, "shared"), (2, "local"), (3, "param")]


def check_aligned(addr: np.ndarray, width: int) -> None:
    """A `width`-byte access at a lane address that is not a multiple of `width` faults (CUDA's
    "misaligned address"), never rounds down."""
    if width < 2:
        return
    addr = np.asarray(addr, np.uint64)
    # a power of two (every PTX access width) tests its low bits, or-ed over the lanes in one pass: a uint64 modulo
    # costs 5-10x an and
    if not width & (width - 1) and not int(np.bitwise_or.reduce(addr, axis=None)) & (width - 1):
        return
    off = addr & np.uint64(width - 1) if not width & (width - 1) else addr % np.uint64(width)
    if off.any():
        bad = int(addr[off != 0][0]) & WINDOW_MASK
        raise MemoryFault(f"misaligned address: a {width}-byte access at 0x{bad:x} is not {width}-byte aligned "
                          "(on the GPU: CUDA error: misaligned address)")


def space_of(parts: list[str]) -> str:
    for p in parts:
        base = p.split("::")[0]
        if base in SPACES:
            return base
    return "generic"


def locate(g, space: str, addr: np.ndarray, idx, width: int):
    """(region, byte offsets) for the active lanes `idx` (None: all lanes) accessing `addr`."""
    if space in ("global", "const"):
        return g.launch.memory.resolve(addr, width)
    if space == "shared":
        if int(addr.max()) + width > g.smem_size:
            raise MemoryFault(f"shared address 0x{int(addr.max()):x} beyond the {g.smem_size}-byte block allocation")
        cta = g.cta_of_lane if idx is None else g.cta_of_lane[idx]
        return g.shared_region, addr + cta * np.uint64(g.smem_size)
    if space == "local":
        if int(addr.max()) + width > g.local_size:
            raise MemoryFault(f"local address 0x{int(addr.max()):x} beyond the {g.local_size}-byte frame")
        lanes = np.arange(g.nlanes, dtype=np.uint64) if idx is None else idx.astype(np.uint64)
        return g.local_region, addr + lanes * np.uint64(g.local_size)
    if space == "param":
        if not (addr >> np.uint64(60)).any():   # a device function's parameter: its slot in local memory
            return locate(g, "local", addr, idx, width)
        region = g.launch.param_region
        off = addr & np.uint64(WINDOW_MASK)
        if int(off.max()) + width > region.size:
            raise MemoryFault(f"parameter address 0x{int(off.max()):x} beyond the {region.size}-byte parameter buffer")
        return region, off
    raise ValueError(space)


def _expand(addr, nvec, isz):
    if nvec == 1:
        return addr
    return (addr[:, None] + np.arange(nvec, dtype=np.uint64) * np.uint64(isz)).reshape(-1)


def _lane_of_item(addr, idx, nvec):
    """Lane index per accessed item; None when every lane accesses exactly one item."""
    if idx is None and nvec == 1:
        return None
    return np.repeat(np.arange(len(addr)) if idx is None else idx, nvec)


def global_parts(g, addr: np.ndarray, width: int) -> list:
    """[(lane selection or None, region, offsets)] of a global access; usually one region."""
    memory = g.launch.memory
    try:
        region, off = memory.resolve(addr, width)
    except MemoryFault:
        if len(addr) < 2:
            raise
        return memory.split(addr, width)
    return [(None, region, off)]


def _parts(g, space, addr, lanes, isz):
    if space in ("global", "const"):
        return global_parts(g, addr, isz)
    return [(None, *locate(g, space, addr, lanes, isz))]


def load(g, space, addr, idx, dtype, nvec=1) -> np.ndarray:
    """Values of shape (lanes, nvec) read from `addr` (uint64 array over the active lanes)."""
    dtype = np.dtype(dtype)
    isz = dtype.itemsize
    flat = _expand(np.asarray(addr, dtype=np.uint64), nvec, isz)
    lanes = _lane_of_item(addr, idx, nvec)
    windows = GENERIC_WINDOWS if space == "generic" else [(None, space)]
    window = flat >> np.uint64(60) if space == "generic" else None
    out = np.empty(flat.shape, dtype)
    for w, sp in windows:
        sel = slice(None) if w is None else window == w
        if w is not None and not sel.any():
            continue
        a = flat[sel] & np.uint64(WINDOW_MASK) if w in (1, 2) else flat[sel]   # param keeps its window
        sub = (np.arange(len(flat)) if lanes is None else lanes)[sel] if w is not None else lanes
        for part, region, off in _parts(g, sp, a, sub, isz):
            if isinstance(region, MulticastRegion):
                raise NotSimulated("a plain load from a multicast address (PTX leaves it undefined; "
                                   "multimem.ld_reduce reads one)", "?")
            if part is None:
                out[sel] = gather(region, off, dtype)
            else:
                idx_sel = np.flatnonzero(sel)[part] if w is not None else part
                out[idx_sel] = gather(region, off, dtype)
    if window is not None and (window > 3).any():
        raise MemoryFault(f"generic address 0x{int(flat[window > 3][0]):x} maps to no state space")
    return out.reshape(-1, nvec)


def store(g, space, addr, idx, dtype, values, nvec=1) -> None:
    """Write `values` (lanes, nvec) or a broadcastable scalar at `addr`; lanes in order, last wins."""
    dtype = np.dtype(dtype)
    isz = dtype.itemsize
    flat = _expand(np.asarray(addr, dtype=np.uint64), nvec, isz)
    vals = np.broadcast_to(np.asarray(values).astype(dtype, copy=False), (len(addr), nvec)).reshape(-1)
    lanes = _lane_of_item(addr, idx, nvec)
    if space == "param" or (space == "generic" and ((flat >> np.uint64(60)) == 3).any()):
        raise MemoryFault("store to a kernel parameter (the parameter space is read-only)")
    windows = GENERIC_WINDOWS[:3] if space == "generic" else [(None, space)]
    window = flat >> np.uint64(60) if space == "generic" else None
    if window is not None and lanes is None:
        lanes = np.arange(len(flat))
    for w, sp in windows:
        sel = slice(None) if w is None else window == w
        if w is not None and not sel.any():
            continue
        a = flat[sel] & np.uint64(WINDOW_MASK) if w else flat[sel]
        v = vals[sel]
        for part, region, off in _parts(g, sp, a, lanes if w is None else lanes[sel], isz):
            # a plain store to a multicast address lands in every member, as multimem.st does (NVLink
            # multicast replicates it; PTX calls non-multimem access to such an address undefined)
            for target in region.members if isinstance(region, MulticastRegion) else (region,):
                scatter(target, off, dtype, v if part is None else v[part])
    if window is not None and (window > 2).any():
        raise MemoryFault(f"generic address 0x{int(flat[window > 2][0]):x} maps to no state space")


def group_regions(g) -> None:
    """Attach the per-group shared and local regions (addresses are space offsets, base 0)."""
    g.shared_region = Region(0, g.shared, "shared memory")
    g.local_region = Region(0, g.local, "local memory")
