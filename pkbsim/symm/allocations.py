"""Symmetric allocations and the state of symmetric memory per world (the registry of allocations) and per
rank, shared by the handle (pkbsim/symm/handle.py) and the device side (pkbsim/device: memory map, protocol,
lowering; pkbsim/cuda: the kernels' address space), which all import this module and not each other for it.

Lifetimes, as torch's: a rank's symmetric allocation is mapped on that rank while the tensor from
`symm_mem.empty` (any view of it) or a handle of it (`rendezvous`; `get_buffer` tensors hold their handle)
is alive. A rank's handle maps every member's buffer and signal pad, so rank x's mapping of a peer's
allocation goes with x's own allocation of that rendezvous: when the program drops the last of those
references on x, x's accesses through any address of them are accesses to freed memory (an illegal
address on the GPU), reported with the kernel line, the address, where the buffer was allocated and
where its last reference went. The simulator keeps the bytes (the memory stays pkb's, so a stale address
never reaches another allocation of the CPU) until nothing maps them; then they wait in a bounded
quarantine (QUARANTINE_BYTES) and are given back, and an address is only reported while its bytes wait.

The storage of a symmetric tensor lies in pkb's memory (a numpy array); the storage holds a view of it
whose finalizer says when torch freed the storage. Finalizers only note the event (they may run on any
thread, inside any operation); `reap` applies them where the registry is read.
"""
from __future__ import annotations

import math
import threading
import weakref
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import torch

from pkbsim.world.comms import storage_key  # noqa: F401 - symm's and the device side's key
from pkbsim.world.plugins import RankState, WorldState

ALIGN = 4096  # symmetric buffers start on a page (the GPU's are granularity-aligned; 64 bytes is the CPU's)
QUARANTINE_BYTES = 1 << 30  # freed symmetric bytes kept (and their stale addresses reported) per world


@dataclass(eq=False)
class Allocation:
    rank: int
    tensor: torch.Tensor | None  # only where pkb keeps no memory of its own (a shape run's fake tensor)
    pad: torch.Tensor  # uint32 words
    # per slot: (signalling rank, group name, clock of the put) and (writing rank, clock, site) of host writes
    signals: dict[int, tuple[int, str, tuple, str]] = field(default_factory=dict)
    host_writes: dict[int, tuple[int, tuple, str]] = field(default_factory=dict)
    memory: np.ndarray | None = None  # the buffer's bytes, pkb's own (uint8)
    site: str = "?"  # where symm_mem.empty allocated it
    storage_alive: bool = True
    live_handles: int = 0
    released: tuple[str, int | None] | None = None  # (site, rank) where the last reference went
    # rank -> that rank's own allocations whose handles map this one (rendezvous)
    mapped_by: dict[int, list[Allocation]] = field(default_factory=dict)
    peers: list[Allocation] = field(default_factory=list)  # the peers' allocations its handles map

    @property
    def base(self) -> int:
        return int(self.memory.ctypes.data) if self.memory is not None else self.tensor.untyped_storage().data_ptr()

    @property
    def nbytes(self) -> int:
        return int(self.memory.nbytes) if self.memory is not None else self.tensor.untyped_storage().nbytes()

    def storage(self, keep=None) -> torch.UntypedStorage:
        """A storage over this buffer's bytes (a new storage object at the same address) that keeps `keep`
        alive; the allocation's tensor's own storage where pkb has no bytes of its own (a shape run)."""
        if self.memory is None:
            return self.tensor.untyped_storage()
        view = self.memory.view(HeldBytes)
        view.keep = keep
        return torch.from_numpy(view).untyped_storage()

    def unmapped_for(self, rank: int) -> Allocation | None:
        """The allocation whose release unmapped this one on `rank` (itself or `rank`'s own of the same
        rendezvous), or None while `rank` maps it."""
        if self.rank == rank:
            return self if self.released is not None else None
        own = self.mapped_by.get(rank)
        if own:
            return own[0] if all(a.released is not None for a in own) else None
        return self if self.released is not None else None

    def unmapped_everywhere(self) -> bool:
        return self.released is not None and all(a.released is not None for own in self.mapped_by.values()
                                                 for a in own)


class HeldBytes(np.ndarray):
    """A view of pkb's bytes that a storage holds: `keep` is what the storage keeps alive with it (the
    handle a get_buffer tensor came from), as torch's tensors from a handle keep the handle."""
    keep = None


class SymmState:
    """Per-world registry: storage key -> allocation, pad storage key -> allocation."""

    def __init__(self):
        self.by_storage: dict[int, Allocation] = {}
        self.by_pad: dict[int, Allocation] = {}
        self.handles: dict[tuple[int, str], object] = {}  # (storage key, group name) -> this rank's handle
        self.all_handles: weakref.WeakSet = weakref.WeakSet()  # every handle the program still holds
        self.pending: list[tuple[Allocation, str, str, int | None]] = []  # finalizers' notes, for reap
        self.generation = 0  # changes whenever the set of allocations or what they map changes
        self.quarantine: deque[Allocation] = deque()
        self.quarantined = 0
        self.lock = threading.RLock()

    def live_handles(self) -> list:
        """The handles the program still holds, now. Read under the lock: another rank's thread may add one
        meanwhile, and a WeakSet iterates in Python, between whose steps that thread can run ("Set changed
        size during iteration" on a rank of a ThunderKittens all-reduce, blamed on the candidate's line)."""
        with self.lock:
            return list(self.all_handles)

    def add(self, alloc: Allocation, key: int, pad_key: int) -> None:
        self.reap()
        with self.lock:
            self.by_storage[key] = alloc
            self.by_pad[pad_key] = alloc
            self.generation += 1

    def reap(self) -> None:
        """Apply what the finalizers noted: storages and handles that went, allocations no longer mapped."""
        if not self.pending:
            return
        with self.lock:
            while self.pending:
                alloc, what, site, rank = self.pending.pop(0)
                if what == "storage":
                    alloc.storage_alive = False
                    # torch's rendezvous cache lives in the allocation: it goes with the storage
                    gone = [k for k, h in self.handles.items() if h._allocs[h.rank] is alloc]
                    for k in gone:
                        before = len(self.pending)
                        del self.handles[k]   # may finalize the handle: a note handled in this loop
                        # whose reference was pkb's: it went where the storage went
                        self.pending[before:] = [(a, w, site, rank) if a is alloc and w == "handle" else n
                                                 for n in self.pending[before:] for a, w in [n[:2]]]
                else:
                    alloc.live_handles -= 1
                if alloc.released is None and not alloc.storage_alive and alloc.live_handles <= 0:
                    alloc.released = (site, rank)
                    self.generation += 1
                    self._retire(alloc)

    def _retire(self, alloc: Allocation) -> None:
        """Quarantine what no rank maps any more (this allocation, the peers' it mapped); give back the oldest."""
        for a in dict.fromkeys([alloc, *alloc.peers]):
            if a.memory is not None and a.unmapped_everywhere() and a not in self.quarantine:
                self.quarantine.append(a)
                self.quarantined += a.nbytes + a.pad.numel() * 4
        while self.quarantined > QUARANTINE_BYTES and self.quarantine:
            old = self.quarantine.popleft()
            self.quarantined -= old.nbytes + old.pad.numel() * 4
            self.by_storage.pop(old.base, None)
            self.by_pad.pop(old.pad.data_ptr(), None)
            old.memory, old.mapped_by, old.peers = None, {}, []
            self.generation += 1


def new_buffer(rank: int, size: tuple, probe: torch.Tensor, pad: torch.Tensor, st: SymmState,
               site: str) -> tuple[torch.Tensor, Allocation]:
    """A symmetric tensor of `size` over pkb's own memory, uninitialised (untouched, as torch's), or filled
    with the value of `probe` (a one-element allocation of the program's dtype) where that holds the
    screen's NaN poison (pkbsim/taskrun.py); and its allocation (not yet registered)."""
    dtype = probe.dtype
    nbytes = math.prod(size) * probe.element_size()
    raw = np.empty(nbytes + ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGN
    memory = raw[start:start + nbytes]
    if nbytes and _poisoned(probe):
        torch.from_numpy(memory).view(dtype).fill_(probe.item())
    alloc = Allocation(rank, None, pad, memory=memory, site=site)
    held = memory.view(HeldBytes)   # the storage's own view: its death is the storage's
    storage = torch.from_numpy(held).untyped_storage()
    fin = weakref.finalize(held, _note, st.pending, alloc, "storage")
    fin.atexit = False
    del held
    t = torch.empty(0, dtype=dtype).set_(storage, 0, size)
    return t, alloc


def _poisoned(probe: torch.Tensor) -> bool:
    if probe.is_floating_point():
        return bool(torch.isnan(probe).all())
    if probe.is_complex() or probe.dtype == torch.bool:
        return False
    return bool((probe == -1).all())


def track_handle(handle, alloc: Allocation, st: SymmState) -> None:
    """`handle` (a rank's) maps `alloc`, that rank's own allocation, while it lives."""
    with st.lock:
        alloc.live_handles += 1
        st.all_handles.add(handle)
    fin = weakref.finalize(handle, _note, st.pending, alloc, "handle")
    fin.atexit = False


def note_rendezvous(allocs: list[Allocation], st: SymmState) -> None:
    """Each member's handle maps every member's allocation."""
    with st.lock:
        for own in allocs:
            for a in allocs:
                if a is not own:
                    mappers = a.mapped_by.setdefault(own.rank, [])
                    if own not in mappers:
                        mappers.append(own)
                    if a not in own.peers:
                        own.peers.append(a)
        st.generation += 1


def _note(pending: list, alloc: Allocation, what: str) -> None:
    """A finalizer: note where the reference went (the program's line, its rank); reap applies it."""
    from pkbsim.world.context import current
    from pkbsim.world.sites import user_site
    try:
        ctx = current()
        pending.append((alloc, what, user_site(3), ctx.rank if ctx is not None else None))  # past finalize
    except Exception:  # noqa: BLE001 - a finalizer must not raise; the note without its site still counts
        pending.append((alloc, what, "?", None))


def freed_message(alloc: Allocation, by: Allocation, rank: int, addr: int, on_pad: bool = False) -> str:
    """The report of an access by `rank` at `addr` into `alloc` after `by` (its mapping on `rank`) was freed."""
    site, _ = by.released or ("?", None)
    what = f"rank {alloc.rank}'s symmetric {'signal pad' if on_pad else 'buffer'} (allocated at {alloc.site})"
    if by is alloc:
        how = f"freed: its tensor and every handle of it were dropped (the last reference went at {site})"
    else:
        how = (f"unmapped on rank {rank}: rank {rank} dropped its own symmetric tensor of that rendezvous "
               f"(allocated at {by.site}) and every handle of it (the last reference went at {site}), and "
               f"its handle mapped the peers' buffers")
    return (f"illegal memory access (use after free): rank {rank} accesses address 0x{addr:x} in {what}, which "
            f"was {how}; keep the handle (or the tensor) alive as long as its addresses are used")


@dataclass
class SymmRank:
    """A rank's own: how many handle barriers it ran (ids in the trace), its workspace buffer per group."""
    barriers: int = 0
    workspaces: dict[str, torch.Tensor] = field(default_factory=dict)


WORLD_STATE = WorldState(lambda world: SymmState())
RANK_STATE = RankState(SymmRank)


def state(world) -> SymmState:
    return WORLD_STATE.of(world)
