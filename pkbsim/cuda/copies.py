"""Copies and fills an extension asks the CUDA runtime for (cudaMemcpy*, cudaMemset*), done in the rank's world.

The simulated device runs all work at the call, on the rank's thread, so a copy is in stream order by
construction. What the runtime stand-in alone could not do: see the memory. Here a copy or fill is checked
against the rank's address space (its tensors, every rank's symmetric buffers, live allocations: an address
outside them is a MemoryFault naming the candidate's call, as on a GPU, never a write to host memory), and
the bytes it reads or writes in symmetric buffers become get/put events for the race detector, like a
kernel's: a copy into a peer's buffer that no signal or barrier orders before the peer's read is a race,
reported with both sites, instead of data that arrives early or late depending on which thread ran first.
"""
from __future__ import annotations

import ctypes

from pkbsim.cuda.memory import rank_memory
from pkbsim.device.accesses import Access
from pkbsim.ptx.errors import MemoryFault
from pkbsim.ptx.memory import Region
from pkbsim.world.context import current


def _span(space, addr: int, n: int, what: str) -> None:
    """Raise unless bytes [addr, addr + n) lie in one plain region of `space`."""
    region = space.find(addr)
    if not isinstance(region, Region) or addr + n > region.base + region.size:
        where = "outside every allocation" if region is None else f"beyond the end of {region.name}" \
            if isinstance(region, Region) else f"in {region.name} (a copy to or from it is not simulated)"
        raise MemoryFault(f"{what}: bytes [0x{addr:x}, 0x{addr + n:x}) are {where}")


def _events(ctx, lo: int, n: int, write: bool, site: str, what: str) -> None:
    """The copy's bytes of symmetric buffers as get (read) or put (write) events, race-checked."""
    access = Access.find(ctx, lo, lo + n, n)
    if access.region is not None and not access.region.on_pad:
        access.emit_data(ctx.world, "put" if write else "get", site, what)


def copy(dst: int, src: int | None, n: int, value: int, tensors=(), site: str = "?") -> None:
    """Copy n bytes from src to dst (src None: fill dst with the byte `value`) as the calling rank's device."""
    if n == 0:
        return
    ctx = current()
    what = "cudaMemcpy" if src is not None else "cudaMemset"
    if ctx is not None:
        space = rank_memory(ctx, tensors)
        if src is not None:
            _span(space, src, n, f"{what} source")
        _span(space, dst, n, f"{what} destination")
        if src is not None:
            _events(ctx, src, n, False, site, what)
        _events(ctx, dst, n, True, site, what)
    if src is None:
        ctypes.memset(dst, value, n)
    else:
        ctypes.memmove(dst, src, n)
