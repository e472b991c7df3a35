"""What an interpreted kernel does to memory, lowered into the protocol IR.

The interpreter's builder turns every `tl.load`, `tl.store` and atomic into a call on raw addresses;
these wrappers see the active addresses (a misaligned one faults, as on the GPU), find the symmetric
allocation they fall in (a peer's buffer or signal pad) and emit: `get`/`put` for data (race-checked,
counted per peer for the cost model), `signal` for a flag write, `wait` for a poll (a volatile load, any read of a signal pad, or an atomic
that left memory unchanged). Repeated unchanged polls block the rank (pkbsim.device.spin).
"""
from __future__ import annotations

import contextlib

import numpy as np
from triton.runtime import interpreter as interp

from pkbsim.device import spin, spin_handoff
from pkbsim.device.accesses import Access, byte_runs
from pkbsim.device.memory_map import check_mapped
from pkbsim.device.protocol import device_state, emit
from pkbsim.device.triton_bounds import Bounds
from pkbsim.device.triton_launch import current_launch
from pkbsim.ptx.access import check_aligned
from pkbsim.ptx.errors import MemoryFault
from pkbsim.world.context import current
from pkbsim.world.sites import user_site

_SEM = {"ACQUIRE": "acquire", "RELEASE": "release", "RELAXED": "relaxed", "ACQUIRE_RELEASE": "acq_rel"}


def _active(ptrs, mask) -> tuple[np.ndarray, int]:
    addrs = np.asarray(ptrs.data).reshape(-1)
    if mask is not None:
        addrs = addrs[np.asarray(mask.data).reshape(-1).astype(bool)]
    itemsize = np.dtype(interp._get_np_dtype(ptrs.get_element_ty())).itemsize
    try:
        check_aligned(addrs, itemsize)  # the GPU faults; the CPU would read across the word
    except MemoryFault as e:
        raise MemoryFault(f"{e} at {user_site()}") from None
    return addrs, itemsize


def _access(ctx, addrs: np.ndarray, itemsize: int, launch, what: str) -> Access:
    lo = int(addrs.min())
    region = device_state(ctx.world).memory.find(lo, int(addrs.max()) + itemsize)
    try:
        check_mapped(region, ctx.rank, lo)  # a freed symmetric buffer: illegal address
    except MemoryFault as e:
        raise MemoryFault(f"{e} at {user_site()}") from None
    if region is None:  # not one symmetric buffer: every address must be in memory the kernel may touch
        if launch.bounds is None:
            launch.bounds = Bounds(launch.tensors)
        launch.bounds.check(ctx, addrs, itemsize, what)
    runs = byte_runs(addrs, itemsize) if region is not None and not region.on_pad else None
    return Access.of(ctx, addrs, itemsize, region, runs)


def _owner(acc: Access) -> int | None:
    return acc.region.owner if acc.region is not None else None


FLAG_BYTES = 8  # a store this small may be a flag another program waits on: it stamps the wait chain


def _flag_read(launch, acc: Access, seen: bytes) -> None:
    launch.chains.read(launch.work, launch.current, acc.lo, seen, acc.writers())


def _poll(ctx, launch, acc: Access, site: str, observed: bytes) -> None:
    launch.work.polled = True
    spin.poll(ctx, launch.polls, acc.lo, acc.hi, observed, acc.label(), acc.writers(), site,
              launch.where, launch.has_pending, launch.run_pending)


def _wrote(ctx, launch) -> None:
    launch.polls.clear()
    with ctx.world.lock:
        ctx.world.changed()


def masked_load(original):
    def load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        ctx, launch = current(), current_launch()
        if ctx is None or launch is None:
            return original(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)
        addrs, itemsize = _active(ptrs, mask)
        acc = _access(ctx, addrs, itemsize, launch, "load") if addrs.size else None
        if acc is not None and acc.region is not None and not acc.region.on_pad and not is_volatile:
            acc.emit_data(ctx.world, "get", user_site(), launch.where)
        polling = acc is not None and (is_volatile or (acc.region is not None and acc.region.on_pad))
        with ctx.world.lock if polling else contextlib.nullcontext():  # a poll reports the value the load returned
            out = original(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)
            seen = acc.snapshot() if polling else b""
            if polling:
                spin_handoff.polled(ctx, acc.lo, acc.hi, seen)
        if acc is not None and not polling:
            acc.count(launch.work, write=False)
            launch.work.count_load(launch.current, acc.lo, acc.sectors)
        if polling:
            launch.work.synchronised(launch.current)
            launch.chains.poll(launch.work, launch.current, [acc.lo])
            _flag_read(launch, acc, seen)
            site = user_site()
            emit(ctx.world, acc.event("wait", site, launch.where, op="poll", value=_nonzero(seen), sem="relaxed"),
                 acc.region, acc.lo)
            _poll(ctx, launch, acc, site, seen)
        return out
    return load


def masked_store(original):
    def store(self, ptrs, value, mask, cache_modifier, eviction_policy):
        ctx, launch = current(), current_launch()
        if ctx is None or launch is None:
            return original(self, ptrs, value, mask, cache_modifier, eviction_policy)
        addrs, itemsize = _active(ptrs, mask)
        if not addrs.size:
            return original(self, ptrs, value, mask, cache_modifier, eviction_policy)
        acc = _access(ctx, addrs, itemsize, launch, "store")
        site = user_site()
        with spin_handoff.writing(ctx, [(acc.lo, acc.hi, _owner(acc))], site, launch.where):
            if acc.region is not None and not acc.region.on_pad:
                acc.emit_data(ctx.world, "put", site, launch.where)
            out = original(self, ptrs, value, mask, cache_modifier, eviction_policy)
            if acc.region is not None and acc.region.on_pad:  # a plain store to a flag: relaxed, it releases nothing
                emit(ctx.world, acc.event("signal", site, launch.where, op="store", value=_nonzero(acc.snapshot()),
                                          sem="relaxed"), acc.region, acc.lo)
        acc.count(launch.work, write=True)
        launch.work.wrote(launch.current)
        if acc.region is None or not acc.region.on_pad:
            launch.work.store_ops += 1
        if acc.nbytes <= FLAG_BYTES:
            launch.chains.wrote(launch.current, acc.lo, acc.snapshot())
        _wrote(ctx, launch)
        return out
    return store


def _atomic(ctx, launch, ptr, mask, sem, scope, op: str, run):
    """Run one atomic; lower it to wait (acquire side) and signal (if memory changed) or a poll."""
    addrs, itemsize = _active(ptr, mask)
    if not addrs.size:
        return run()
    launch.work.synchronised(launch.current)
    order = _SEM.get(getattr(sem, "name", ""), "acq_rel")
    if order in ("release", "acq_rel"):
        launch.work.released(launch.current, getattr(scope, "name", "") == "SYSTEM")
    acc = _access(ctx, addrs, itemsize, launch, f"atomic {op}")
    site = user_site()
    # the flag's value and the clock released into it change together, with the check that no poller misses it
    with spin_handoff.writing(ctx, [(acc.lo, acc.hi, _owner(acc))], site, launch.where):
        before = acc.snapshot()
        out = run()
        after = acc.snapshot()
        emit(ctx.world, acc.event("wait", site, launch.where, op=op, value=_nonzero(before), sem=order), acc.region,
             acc.lo)
        if after != before:
            emit(ctx.world, acc.event("signal", site, launch.where, op=op, value=_nonzero(after), sem=order),
                 acc.region, acc.lo)
        spin_handoff.atomic(ctx, [(acc.lo, acc.hi)], [before], [after])
    if after == before:
        launch.chains.poll(launch.work, launch.current, [acc.lo])
    _flag_read(launch, acc, before)
    if after != before:  # polls that change nothing are not counted: their number depends on timing
        acc.count(launch.work, write=True)
        launch.work.wrote(launch.current)
        launch.work.atomic(addrs, launch.current, combined=True)
        if addrs.size == 1:   # a scalar atomic: its old value goes to every thread of the program
            launch.work.chain_step(launch.current, "broadcast_atomics")
        launch.chains.wrote(launch.current, acc.lo, after)
        _wrote(ctx, launch)
    else:
        _poll(ctx, launch, acc, site, after)
    return out


def _nonzero(data: bytes) -> int:
    return int(any(data))


def atomic_cas(original):
    def cas(self, ptr, cmp, val, sem, scope):
        ctx, launch = current(), current_launch()
        if ctx is None or launch is None:
            return original(self, ptr, cmp, val, sem, scope)
        return _atomic(ctx, launch, ptr, None, sem, scope, "cas", lambda: original(self, ptr, cmp, val, sem, scope))
    return cas


def atomic_rmw(original):
    def rmw(self, rmw_op, ptr, val, mask, sem, scope):
        ctx, launch = current(), current_launch()
        if ctx is None or launch is None:
            return original(self, rmw_op, ptr, val, mask, sem, scope)
        name = getattr(rmw_op, "name", "rmw").lower()
        return _atomic(ctx, launch, ptr, mask, sem, scope, name,
                       lambda: original(self, rmw_op, ptr, val, mask, sem, scope))
    return rmw


def patch_memory(patches) -> None:
    cls = interp.InterpreterBuilder
    for name, wrap in (("create_masked_load", masked_load), ("create_masked_store", masked_store),
                       ("create_atomic_cas", atomic_cas), ("create_atomic_rmw", atomic_rmw)):
        patches.set(cls, name, wrap(getattr(cls, name)))
