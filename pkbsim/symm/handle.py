"""The symmetric-memory stand-in: allocations, their signal pads, and the duck-typed handle.

All ranks share one address space, so `buffer_ptrs` are the real addresses of the peers' CPU buffers
and device code run on the CPU can follow them. Signal pads follow PyTorch's protocol: a put from
rank s to rank d on channel c sets slot c*world+s of d's pad (blocking while it is still set); a wait
clears the slot of its own pad (blocking until it is set). Each blocking step goes through the world's
wait-for check, so a wait that nothing will satisfy is reported, never hung.
"""
from __future__ import annotations

import itertools
import os

import numpy as np
import torch

from pkbsim.device import lower_symm
from pkbsim.symm.allocations import (  # noqa: F401 - also this module's API
    RANK_STATE,
    Allocation,
    HeldBytes,
    SymmState,
    state,
    storage_key,
)
from pkbsim.world.clocks import happens_before
from pkbsim.world.comms import behind_the_program, is_fake
from pkbsim.world.context import require
from pkbsim.world.findings import Finding
from pkbsim.world.sites import user_site
from pkbsim.world.world import SimAbort, Wait

SIGNAL_PAD_BYTES = 9216  # torch's default (get_signal_pad_size)
MULTICAST_BASE = 1 << 56  # above every user-space pointer (x86-64: < 2**47), below the PTX interpreter's windows
_multicast_slots = itertools.count()  # one 2**40-byte address range per handle that asks for one


def multicast_disabled() -> bool:
    """torch's switch for symmetric memory's multicast objects (read when a handle is asked, as torch does)."""
    return os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST", "0").lower() not in ("0", "false", "")


class SimSymmetricMemory:
    """Duck-typed `torch._C._distributed_c10d._SymmetricMemory` for one rank and one group. Like the real
    (pybind) handle it takes no attributes of a program's own: a candidate that caches something on it
    raises AttributeError here as on the GPU."""

    __slots__ = ("_allocs", "_comm", "rank", "world_size", "offset", "buffer_size", "signal_pad_size",
                 "buffer_ptrs", "signal_pad_ptrs", "_ptr_tables", "buffer_ptrs_dev", "signal_pad_ptrs_dev",
                 "_multicast", "device", "__weakref__")

    def __init__(self, allocs: list[Allocation], group_rank: int, comm, offset: int):
        self._allocs, self._comm = allocs, comm
        self.rank, self.world_size = group_rank, len(allocs)
        self.offset = offset
        self.buffer_size = allocs[group_rank].nbytes
        self.signal_pad_size = SIGNAL_PAD_BYTES
        self.buffer_ptrs = [a.base for a in allocs]
        self.signal_pad_ptrs = [a.pad.data_ptr() for a in allocs]
        self._ptr_tables = (torch.tensor(self.buffer_ptrs, dtype=torch.int64),
                            torch.tensor(self.signal_pad_ptrs, dtype=torch.int64))
        self.buffer_ptrs_dev = self._ptr_tables[0].data_ptr()
        self.signal_pad_ptrs_dev = self._ptr_tables[1].data_ptr()
        self._multicast: int | None = None
        self.device = torch.device("cuda", group_rank)

    @property
    def group_name(self) -> str:
        return self._comm.name

    @property
    def multicast_ptr(self) -> int:
        """A multicast address for device code: an address range of the buffer's size that no memory backs
        (a 1 GiB buffer costs nothing here; a host dereference faults, as one of a device pointer would),
        which the PTX interpreter maps onto every member's buffer (pkbsim.cuda.memory):
        multimem.ld_reduce / multimem.st there act on all peers.

        0 where torch gives no multicast object: with TORCH_SYMM_MEM_DISABLE_MULTICAST set (GPU machines
        whose NVLink multicast is off; PKB gemini-CUDA 13 used the address unchecked and faulted on one)."""
        if multicast_disabled():
            return 0
        if self._multicast is None:
            self._multicast = MULTICAST_BASE + (next(_multicast_slots) << 40)
        return self._multicast

    def multicast_range(self) -> tuple[int, int] | None:
        """(address, bytes) of the multicast range once a program asked for it."""
        return None if self._multicast is None else (self._multicast, self.buffer_size)

    @property
    def global_rank(self) -> int:
        return self._allocs[self.rank].rank

    def member_allocations(self) -> list[Allocation]:
        return list(self._allocs)

    def pointer_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._ptr_tables

    def _global(self, group_rank: int) -> int:
        if not 0 <= group_rank < self.world_size:
            raise ValueError(f"peer rank {group_rank} is out of range for a group of {self.world_size}")
        return self._comm.ranks[group_rank]

    # ---- views -----------------------------------------------------------------------------------
    def get_buffer(self, rank: int, sizes, dtype: torch.dtype, storage_offset: int = 0) -> torch.Tensor:
        storage = self._allocs[rank].storage(keep=self)  # as torch's, the tensor keeps the handle
        sizes = [sizes] if isinstance(sizes, int) else list(sizes)
        numel = 1
        for s in sizes:
            numel *= s
        itemsize = torch.empty((), dtype=dtype).element_size()
        if (storage_offset + numel) * itemsize > storage.nbytes():
            raise RuntimeError(f"get_buffer: {numel} elements of {dtype} at offset {storage_offset} exceed the "
                               f"{storage.nbytes()}-byte symmetric buffer of rank {rank}")
        return torch.empty(0, dtype=dtype).set_(storage, storage_offset, sizes)

    def get_remote_tensor(self, peer: int, sizes, dtype: torch.dtype) -> torch.Tensor:
        return self.get_buffer(peer, sizes, dtype, self.offset // torch.empty((), dtype=dtype).element_size())

    def get_signal_pad(self, rank: int, sizes=None, dtype: torch.dtype | None = None,
                       storage_offset: int = 0) -> torch.Tensor:
        pad = _keeping(self._allocs[rank].pad, self)  # as get_buffer's, the tensor keeps the handle
        if dtype is None or dtype == torch.uint32:
            view = pad
        else:
            view = pad.view(dtype)
        view = view[storage_offset:]
        return view if not sizes else view[: _numel(sizes)].view(sizes)

    # ---- signalling --------------------------------------------------------------------------------
    def _slot(self, channel: int, src: int) -> int:
        slot = channel * self.world_size + src
        if channel < 0 or slot >= self._allocs[0].pad.numel():
            ctx = require()
            site = user_site()
            msg = (f"signal channel {channel} is out of range: the pad holds "
                   f"{self._allocs[0].pad.numel() // self.world_size} channels for {self.world_size} ranks")
            ctx.world.fail(Finding("protocol", msg, [ctx.rank], [site]))
            raise SimAbort(msg)
        return slot

    def put_signal(self, dst_rank: int, channel: int = 0, timeout_ms: int = 0, *, _barrier: int | None = None) -> None:
        ctx = require()
        site = user_site()
        dst_global = self._global(dst_rank)
        alloc = self._allocs[dst_rank]
        slot = self._slot(channel, self.rank)
        ctx.world.block(ctx.rank, Wait(
            what=f"put_signal(dst_rank={dst_rank}, channel={channel})", site=site,
            ready=lambda: _get_slot(alloc.pad, slot) == 0,
            waits_for=lambda: {dst_global},
            explain=lambda: (f"rank {dst_global}'s signal pad slot {slot} (channel {channel}, from rank "
                             f"{ctx.rank}) is still set: the previous signal was never consumed by a wait_signal"),
            kind="protocol"))
        with ctx.world.lock:
            clock = ctx.world.clocks.snapshot(ctx.rank)
            lower_symm.on_put_signal(ctx, dst_global, slot, site)
            _check_host_write_race(ctx.world, alloc, slot, clock, site, ctx.rank)
            _set_slot(alloc.pad, slot, 1)
            alloc.signals[slot] = (ctx.rank, self._comm.name, clock, site)
            ctx.trace.record("symm", "put_signal", site, group=self._comm.name, peer=dst_global, channel=channel,
                             **_barrier_field(_barrier))
            ctx.world.changed()

    def wait_signal(self, src_rank: int, channel: int = 0, timeout_ms: int = 0, *, _barrier: int | None = None) -> None:
        ctx = require()
        site = user_site()
        src_global = self._global(src_rank)
        alloc = self._allocs[self.rank]
        slot = self._slot(channel, src_rank)
        ctx.world.block(ctx.rank, Wait(
            what=f"wait_signal(src_rank={src_rank}, channel={channel})", site=site,
            ready=lambda: _get_slot(alloc.pad, slot) != 0,
            waits_for=lambda: {src_global},
            explain=lambda: (f"its signal pad slot {slot} (channel {channel}, from rank {src_global}) is never set"),
            kind="protocol"))
        with ctx.world.lock:
            signaller = alloc.signals.pop(slot, None)
            if signaller is not None and signaller[1] != self._comm.name:
                msg = (f"rank {ctx.rank} consumed signal pad slot {slot} through group {self._comm.name!r}, but "
                       f"rank {signaller[0]} set it through group {signaller[1]!r} at {signaller[3]}: two groups "
                       f"share one allocation's signal pad, so a wait can be satisfied by another group's signal")
                ctx.world.fail(Finding("protocol", msg, [ctx.rank, signaller[0]], [site, signaller[3]]))
                raise SimAbort(msg)
            if signaller is not None:
                ctx.world.clocks.acquire(ctx.rank, signaller[2])
            _set_slot(alloc.pad, slot, 0)
            lower_symm.on_wait_signal(ctx, slot, site)
            ctx.trace.record("symm", "wait_signal", site, group=self._comm.name, peer=src_global, channel=channel,
                             **_barrier_field(_barrier))
            ctx.world.changed()

    def barrier(self, channel: int = 0, timeout_ms: int = 0) -> None:
        """One kernel on a GPU: its signals and waits share one launch in the trace (`barrier` id)."""
        ctx = require()
        lower_symm.on_barrier(ctx, channel, user_site())
        rank = RANK_STATE.of(ctx)
        rank.barriers += 1
        ident = rank.barriers
        for peer in range(self.world_size):
            self.put_signal(peer, channel, _barrier=ident)
        for peer in range(self.world_size):
            self.wait_signal(peer, channel, _barrier=ident)

    def boxed(self):
        return self


def _barrier_field(ident: int | None) -> dict:
    return {} if ident is None else {"barrier": ident}


def _get_slot(pad: torch.Tensor, slot: int) -> int:
    """The simulator's own poll of a pad: no kernel of the program (a `.item()` in the trace would put a
    host read per poll on the candidate's critical path) and no data-dependent op in a shape run."""
    with behind_the_program():
        return int(pad[slot])


def _set_slot(pad: torch.Tensor, slot: int, value: int) -> None:
    """A protocol write to a pad: kept out of the rank's ops mode, which treats pad writes as host resets."""
    with behind_the_program():
        pad[slot] = value


def _keeping(pad: torch.Tensor, handle) -> torch.Tensor:
    """`pad` (a real CPU tensor) through a storage of its own that also keeps `handle` alive."""
    if is_fake(pad):
        return pad
    with behind_the_program():
        view = pad.numpy().view(np.uint8).view(HeldBytes)
        view.keep = handle
        return torch.empty(0, dtype=pad.dtype).set_(torch.from_numpy(view).untyped_storage(), 0, pad.shape)


def _numel(sizes) -> int:
    n = 1
    for s in ([sizes] if isinstance(sizes, int) else sizes):
        n *= s
    return n


def _check_host_write_race(world, alloc: Allocation, slot: int, clock: tuple, site: str, rank: int) -> None:
    """A host write to a pad slot (e.g. a reset) concurrent with a peer's signal may wipe the signal."""
    w = alloc.host_writes.get(slot)
    if w is not None and not happens_before(w[1], clock):
        msg = (f"rank {w[0]} wrote its signal pad slot {slot} at {w[2]} with no synchronisation ordering it "
               f"against rank {rank}'s put_signal at {site}: a signal that lands first is wiped (reset the pad "
               f"before a barrier, not after the rendezvous)")
        world.fail(Finding("race", msg, [w[0], rank], [w[2], site]))
        raise SimAbort(msg)


def on_pad_host_write(world, alloc: Allocation, slots: range, rank: int, site: str) -> None:
    """Called (under the lock) when host code writes a signal pad outside put/wait."""
    clock = world.clocks.snapshot(rank)
    for slot in slots:
        sig = alloc.signals.get(slot)
        if sig is not None and not happens_before(sig[2], clock):
            msg = (f"rank {rank} wrote its signal pad slot {slot} at {site} concurrently with rank {sig[0]}'s "
                   f"put_signal at {sig[3]}: the signal can be wiped (reset the pad before a barrier)")
            world.fail(Finding("race", msg, [rank, sig[0]], [site, sig[3]]))
            return
        alloc.host_writes[slot] = (rank, clock, site)
        alloc.signals.pop(slot, None)
    world.changed()
