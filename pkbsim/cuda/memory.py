"""The address space a kernel launched on a rank sees.

Mapped up front: the tensors passed to the extension function, every rank's symmetric buffers and
signal pads, the pointer tables (`buffer_ptrs_dev`, `signal_pad_ptrs_dev`) and, for the rank's handles,
a multicast range (`multicast_ptr`) whose accesses act on every member's buffer. Anything else is
looked up on demand among the live CPU allocations that the runtime stand-in tracks (tensors the C++
wrapper created, e.g. its outputs). An address in none of these is a MemoryFault naming the source line,
never a silent read of whatever memory lies there.
"""
from __future__ import annotations

import ctypes

import numpy as np

from pkbsim.cuda import runtime_libs
from pkbsim.ptx.errors import MemoryFault
from pkbsim.ptx.memory import AddressSpace, MulticastRegion, Region


class RankMemory(AddressSpace):
    def find(self, addr: int):
        region = super().find(addr)
        if region is None:
            hit = runtime_libs.find_allocation(addr)
            if hit is not None:
                base, size = hit
                raw = (ctypes.c_uint8 * size).from_address(base)
                region = Region(base, np.frombuffer(raw, dtype=np.uint8), f"CPU allocation at 0x{base:x}")
                self.add(region)
        return region

    def map(self, region) -> None:
        """Add a region unless the same memory is mapped already (views of one storage)."""
        try:
            self.add(region)
        except MemoryFault:
            pass


def rank_memory(ctx, tensors) -> RankMemory:
    space = RankMemory()
    for i, t in enumerate(tensors):
        if t.device.type == "cpu" and t.untyped_storage().nbytes():
            space.map(Region.of_tensor(t, f"argument {i}"))
    if ctx is None or not hasattr(ctx.world, "symm"):
        return space
    symm = ctx.world.symm
    for alloc in list(symm.by_storage.values()):
        space.map(Region.of_tensor(alloc.tensor, f"rank {alloc.rank} symmetric buffer"))
        space.map(Region.of_tensor(alloc.pad, f"rank {alloc.rank} signal pad"))
    for handle in list(symm.handles.values()):
        for table in handle.pointer_tables():
            space.map(Region.of_tensor(table, "symmetric-memory pointer table"))
        span = handle.multicast_range()
        if span is not None and handle.global_rank == ctx.rank:
            members = [Region.of_tensor(t, f"rank {r} symmetric buffer") for r, t in handle.member_buffers()]
            space.map(MulticastRegion(*span, members, "multicast buffer"))
    return space
