"""The address space a kernel launched on a rank sees.

Mapped up front: the tensors passed to the extension function, every rank's symmetric buffers and
signal pads, the pointer tables (`buffer_ptrs_dev`, `signal_pad_ptrs_dev`) and, for the rank's handles,
a multicast range (`multicast_ptr`) whose accesses act on every member's buffer. Anything else is
looked up on demand among the live CPU allocations that the runtime stand-in tracks (tensors the C++
wrapper created, e.g. its outputs), then among the program's live tensors on the GPU (a kernel may take
a table of tensor addresses, as a GPU kernel reads any live device allocation: ParallelKernelBench
problem 21's gradients were made before the tracker was installed, and their pointer table faulted here
while the kernel was correct on an H200). An address in none of these is a MemoryFault naming the source
line, never a silent read of whatever memory lies there.
"""
from __future__ import annotations

import bisect
import ctypes
import functools
import gc
import itertools
import threading

import numpy as np
import torch

from pkbsim.cuda import runtime_libs
from pkbsim.ptx.errors import MemoryFault
from pkbsim.ptx.memory import AddressSpace, MulticastRegion, Region
from pkbsim.symm.allocations import state as symm_state
from pkbsim.standins.device_identity import HOST, tagged


class RankMemory(AddressSpace):
    _live: tuple[list[int], list[int]] | None = None  # bases and sizes of live GPU tensors' storages, on a miss

    def find(self, addr: int):
        region = super().find(addr)
        if region is None:
            hit = runtime_libs.find_allocation(addr) or self.live_tensor(addr)
            if hit is not None:
                base, size = hit
                raw = (ctypes.c_uint8 * size).from_address(base)
                region = Region(base, np.frombuffer(raw, dtype=np.uint8), f"CPU allocation at 0x{base:x}")
                self.add(region)
        return region

    def live_tensor(self, addr: int) -> tuple[int, int] | None:
        """(base, size) of a live tensor's storage on a simulated GPU that holds `addr` (the program's tensors
        are found once per launch, at its first address outside every mapped region)."""
        if self._live is None:
            spans = sorted(_device_storages())
            self._live = ([b for b, _ in spans], [n for _, n in spans])
        bases, sizes = self._live
        i = bisect.bisect_right(bases, addr) - 1
        return (bases[i], sizes[i]) if i >= 0 and addr < bases[i] + sizes[i] else None

    def map(self, region) -> None:
        """Add a region unless the same memory is mapped already (views of one storage)."""
        try:
            self.add(region)
        except MemoryFault:
            pass


def _device_storages() -> set[tuple[int, int]]:
    """(address, bytes) of the storage of every live tensor a program sees on a GPU (not host tensors)."""
    spans = set()
    for t in _live_tensors():
        if tagged(t) != HOST:
            try:
                st = t.untyped_storage()
                if st.device.type == "cpu" and st.nbytes():
                    spans.add((st.data_ptr(), st.nbytes()))
            except (RuntimeError, NotImplementedError):  # fake, meta or sparse tensors have no such storage
                continue
    return spans


_is_tensor_type = functools.partial(type.__subclasscheck__, torch._C.TensorBase)  # C only: no __class__ lookup
_twice = functools.partial(itertools.repeat, times=2)
_scan_lock = threading.Lock()


def _live_tensors() -> list[torch.Tensor]:
    """Every live tensor object, found among gc.get_objects() so that no other thread ever sees that list's
    references. Ranks are threads: an object another thread is still building (a tuple that `tuple(genexpr)`
    resizes in place) must keep its single reference, or that thread fails with SystemError. The list lives
    only inside the one C-level call `list(...)`, over iterators that run no Python code (`type` and a
    subtype check; isinstance may call a Python `__getattribute__`), so this thread keeps the GIL until the
    list is freed. The collector is off meanwhile: an allocation may start a collection (3.11), whose
    finalizers would run Python code and so could let another thread run."""
    with _scan_lock:  # another rank's scan would turn the collector back on during this one
        collecting = gc.isenabled()
        gc.disable()
        try:
            return list(_tensor_filter())
        finally:
            if collecting:
                gc.enable()


def _tensor_filter():
    """A lazy iterator over the tensors among gc.get_objects(). `heap` yields the objects' list twice: for
    `compress` and for its selectors (map takes its arguments' items left to right). What holds the list
    lets it go on exhaustion: an iterator made before the list is in it, so holding it after the scan would
    be a cycle that keeps the list alive (itertools.tee would: its buffer predates the list)."""
    heap = itertools.chain.from_iterable(map(_twice, itertools.islice(iter(gc.get_objects, None), 1)))
    selectors = map(functools.partial(map, _is_tensor_type), map(functools.partial(map, type), heap))
    return itertools.chain.from_iterable(map(itertools.compress, heap, selectors))


def rank_memory(ctx, tensors) -> RankMemory:
    space = RankMemory()
    for i, t in enumerate(tensors):
        if t.device.type == "cpu" and t.untyped_storage().nbytes():
            space.map(Region.of_tensor(t, f"argument {i}"))
    if ctx is None:
        return space
    symm = symm_state(ctx.world)
    symm.reap()
    for alloc in list(symm.by_storage.values()):
        # mapped while its bytes are pkb's (freed ones too): the device memory map's check reports a stale
        # address of a freed buffer (pkbsim.device.ptx_memory), never a read of reused memory
        space.map(_symm_region(alloc))
        space.map(Region.of_tensor(alloc.pad, f"rank {alloc.rank} signal pad"))
    for handle in symm.live_handles():
        for table in handle.pointer_tables():
            space.map(Region.of_tensor(table, "symmetric-memory pointer table"))
        span = handle.multicast_range()
        if span is not None and handle.global_rank == ctx.rank:
            members = [_symm_region(a) for a in handle.member_allocations()]
            space.map(MulticastRegion(*span, members, "multicast buffer"))
    return space


def _symm_region(alloc) -> Region:
    name = f"rank {alloc.rank} symmetric buffer"
    if alloc.memory is None:  # no bytes of pkb's own (a shape run's tensor)
        return Region.of_tensor(alloc.tensor, name)
    return Region(alloc.base, alloc.memory, name, owner=alloc)
