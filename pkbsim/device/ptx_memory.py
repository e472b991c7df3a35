"""What an inline-CUDA kernel (run by the PTX interpreter) does to memory, lowered into the protocol IR.

The interpreter calls `KernelObserver.access` for every global or generic load, store, atomic and
multimem access, with the instruction (its qualifiers and source line) and the active addresses. As in
the Triton path: a plain load of a peer's symmetric buffer is a `get` and a plain store a `put`
(race-checked, counted per peer); a `volatile`/`relaxed`/`acquire` load or any load of a signal pad is a
poll (`wait`); a flag store (`volatile`/`relaxed`/`release`, or any store to a pad) is a `signal`; an
atomic is a `wait` and, if it changed memory, a `signal`. Flags in a rank's own (non-symmetric) memory
count too: blocks of one launch synchronise through them (grid barriers, a block that passes the peer
barrier releasing the others). `.acquire`/`.release`/`.acq_rel` qualifiers order them; a `fence`/`membar`
orders the relaxed ones around it (pkbsim.device.protocol). Polls are noted for the scheduler
(pkbsim.device.ptx_launch), which blocks the rank when every block spins.
"""
from __future__ import annotations

import contextlib
import functools
import os

import numpy as np

from pkbsim.device import spin_handoff
from pkbsim.device.accesses import Access, byte_runs
from pkbsim.device.ir import Event
from pkbsim.device.memory_map import check_mapped
from pkbsim.device.protocol import device_state, emit
from pkbsim.device.spin import Poll
from pkbsim.ptx.memory import SHARED_WINDOW, MulticastRegion

_FLAG_LOAD = {"volatile", "relaxed", "acquire"}
_FLAG_STORE = {"volatile", "relaxed", "release"}
_ORDERS = ("acq_rel", "acquire", "release", "relaxed")


@functools.lru_cache(maxsize=4096)
def site_of(loc: str) -> str:
    """'candidate.py:42' for an instruction's '/path/candidate.py:42' (asked at every access: cached)."""
    return os.path.basename(loc)


class KernelObserver:
    """The observer of one launch on one rank; `run` is the launch's record (pkbsim.device.ptx_launch)."""

    def __init__(self, ctx, run):
        self.ctx, self.run = ctx, run
        self.state = device_state(ctx.world)

    def _split(self, addrs: np.ndarray, width: int, bounds: tuple[int, int] | None = None) -> list:
        """The device memory map's split, every part checked to be mapped on this rank (a freed symmetric
        buffer is an illegal address; the interpreter adds the instruction); `bounds` as MemoryMap.split."""
        parts = self.state.memory.split(addrs, width, bounds)
        for region, sub in parts:
            if region is not None:
                check_mapped(region, self.ctx.rank, bounds[0] if bounds and sub is addrs else int(sub.min()))
        return parts

    def _accesses(self, addrs: np.ndarray, width: int, repeat: int = 1) -> list[Access]:
        # every address a multiple of the width (the interpreter faults on any other, but for TMA's elements): runs and
        # sectors are counted per item
        aligned = width == 1 or not int(np.bitwise_or.reduce(addrs)) & (width - 1)
        whole = int(addrs.min()), int(addrs.max())   # once: the split, the check, the access, its runs and sectors
        out = []
        for region, sub in self._split(addrs, width, whole):
            b = whole if sub is addrs else (int(sub.min()), int(sub.max()))
            runs = byte_runs(sub, width, aligned, b) if region is not None else None
            out.append(Access.of(self.ctx, sub, width, region, runs, aligned=aligned, bounds=b))
            out[-1].nbytes *= repeat
        return out

    def _words(self, addrs: np.ndarray, width: int, repeat: int = 1) -> list[Access]:
        """One access per distinct address: each flag word is its own signal/wait (lane t of a barrier
        polls the slot of peer t)."""
        uniq, counts = np.unique(addrs, return_counts=True)
        return [Access(self.ctx, lo, lo + width, int(n) * width * repeat, region)
                for region, sub in self._split(uniq, width)
                for lo, n in zip(map(int, sub), counts[np.searchsorted(uniq, sub)])]

    def access(self, g, op: str, ins, addrs, width: int, perform):
        addrs = np.asarray(addrs, dtype=np.uint64)
        repeat = 1
        if op == "ld" and addrs.size > 1 and addrs.strides[0] == 0:
            # every lane loads one address (the interpreter hands such a load over as a zero-stride vector): the
            # access of one lane, its bytes counted once a lane; its runs, sectors, words and race checks are the same
            repeat, addrs = addrs.size, addrs[:1]
        glob = addrs if int(addrs.max()) < SHARED_WINDOW else addrs[addrs < np.uint64(SHARED_WINDOW)]
        if not glob.size:
            return perform()
        if op == "multimem" or (op == "st" and isinstance(g.launch.memory.find(int(glob.min())), MulticastRegion)):
            return self._multimem(g, ins, glob, width, perform)  # a plain store to a multicast address too
        quals = set(ins.parts)
        site, where = site_of(ins.loc), self.run.where(g)
        if op == "ld" and not quals & _FLAG_LOAD:
            return self._load(g, self._data_or_pad_words(glob, width, repeat), quals, site, where, perform)
        if op == "st" and not quals & _FLAG_STORE:
            return self._store(g, self._data_or_pad_words(glob, width), quals, site, where, perform)
        words = self._words(glob, width, repeat)
        if op == "ld":
            return self._load(g, words, quals, site, where, perform)
        if op == "st":
            return self._store(g, words, quals, site, where, perform)
        return self._atomic(g, words, quals, op, site, where, perform)

    def _data_or_pad_words(self, addrs, width, repeat: int = 1) -> list[Access]:
        """Data ranges per region, but signal-pad words one by one; `repeat`: lanes each address stands for."""
        accs = self._accesses(addrs, width, repeat)
        if any(a.region is not None and a.region.on_pad for a in accs):
            return [w for a in accs for w in (self._words(addrs[(addrs >= a.lo) & (addrs < a.hi)], width, repeat)
                                                if a.region is not None and a.region.on_pad else [a])]
        return accs

    def _load(self, g, accs, quals, site, where, perform):
        world, work, block = self.ctx.world, self.run.work, self.run.blocks.get(id(g))
        flag = bool(quals & _FLAG_LOAD)
        polled = [a for a in accs if flag or (a.region is not None and a.region.on_pad)]
        for a in accs:
            if a not in polled and a.region is not None:
                a.emit_data(world, "get", site, where)
        # a poll reports the value the load returned, not a peer's write landing after it
        with world.lock if polled else contextlib.nullcontext():
            out = perform()
            seen = [a.snapshot() for a in polled]
            for a, data in zip(polled, seen):
                spin_handoff.polled(self.ctx, a.lo, a.hi, data)
        if polled:
            work.synchronised(block)
            self.run.chains.poll(work, block, [a.lo for a in polled])
        data_accs = [a for a in accs if a not in polled]
        for a in data_accs:
            a.count(work, write=False)
        if data_accs:
            work.count_load(block, data_accs[0].lo, sum(a.sectors for a in data_accs) // g.nctas, g.nctas)
        sem = "acquire" if "acquire" in quals else "relaxed"
        for a, data in zip(polled, seen):
            emit(world, a.event("wait", site, where, op="poll", value=_nonzero(data), sem=sem), a.region, a.lo)
            self.run.chains.read(work, block, a.lo, data, a.writers())
            self._poll(a, site, data)
        return out

    def _store(self, g, accs, quals, site, where, perform):
        world, work, block = self.ctx.world, self.run.work, self.run.blocks.get(id(g))
        flag = bool(quals & _FLAG_STORE)
        signals = [a for a in accs if flag or (a.region is not None and a.region.on_pad)]
        if "release" in quals:
            work.released(block, "sys" in quals)
        with self._holding(accs, site, where):  # the flag's value and the clock released into it change together
            for a in accs:
                if a.region is not None and a not in signals:
                    a.emit_data(world, "put", site, where)
            out = perform()
            sem = "release" if "release" in quals else "relaxed"
            for a in signals:
                value = a.snapshot()
                emit(world, a.event("signal", site, where, op="store", value=_nonzero(value), sem=sem), a.region, a.lo)
                self.run.chains.wrote(block, a.lo, value)
        for a in accs:
            a.count(work, write=True)
        work.wrote(block)
        if len(signals) < len(accs):
            work.store_ops += g.nctas
        self._wrote()
        return out

    def _atomic(self, g, accs, quals, op, site, where, perform):
        world, work, block = self.ctx.world, self.run.work, self.run.blocks.get(id(g))
        order = next((q for q in _ORDERS if q in quals), "relaxed")
        work.synchronised(block)
        if order in ("release", "acq_rel"):
            work.released(block, "sys" in quals)
        with self._holding(accs, site, where):
            before = [a.snapshot() for a in accs]
            out = perform()
            after = [a.snapshot() for a in accs]
            for a, b, c in zip(accs, before, after):
                emit(world, a.event("wait", site, where, op=op, value=_nonzero(b), sem=order), a.region, a.lo)
                if c != b:
                    emit(world, a.event("signal", site, where, op=op, value=_nonzero(c), sem=order), a.region, a.lo)
            spin_handoff.atomic(self.ctx, [(a.lo, a.hi) for a in accs], before, after)
        unchanged = [a.lo for a, b, c in zip(accs, before, after) if c == b]
        if unchanged:
            self.run.chains.poll(work, block, unchanged)
        for a, b, c in zip(accs, before, after):
            self.run.chains.read(work, block, a.lo, b, a.writers())
            if c != b:
                self.run.chains.wrote(block, a.lo, c)
        changed = [a for a, b, c in zip(accs, before, after) if c != b]
        returns = not _reduction(op, quals)
        for a in changed:
            a.count(work, write=True)
            work.atomic(np.full(a.nbytes // max(a.hi - a.lo, 1), a.lo), block, returns=returns)
        if changed and returns:
            work.chain_step(block, "awaited_atomics")
        if changed:
            work.wrote(block)
            with world.lock:
                world.changed()
        for a, b, c in zip(accs, before, after):
            if c == b:  # an atomic that changed nothing is a poll (atomicCAS/atomicAdd(p, 0) spin loops)
                self._poll(a, site, c)
        return out

    def _multimem(self, g, ins, addrs, width, perform):
        """A multicast access reads (ld_reduce) or writes (st, red) the same bytes of every member."""
        region = g.launch.memory.find(int(addrs.min()))
        if not isinstance(region, MulticastRegion):
            return perform()
        write = ins.parts[1] != "ld_reduce"
        site, where = site_of(ins.loc), self.run.where(g)
        off = addrs - np.uint64(region.base)
        if ins.parts[1] == "red":  # an atomic reduction on every member (a flag, e.g. a barrier's arrival count)
            member = np.concatenate([off + np.uint64(m.base) for m in region.members])
            return self._atomic(g, self._words(member, width), set(ins.parts), "red", site, where, perform)
        accs = [a for m in region.members for a in self._accesses(off + np.uint64(m.base), width)]
        with self._holding(accs, site, where) if write else contextlib.nullcontext():
            for a in accs:
                if a.region is not None:
                    a.emit_data(self.ctx.world, "put" if write else "get", site, where)
            out = perform()
        for a in accs:
            a.count(self.run.work, write=write)
        if not write:
            self.run.work.load_ops += g.nctas
        else:
            self.run.work.store_ops += g.nctas
        if write:
            self.run.work.wrote(self.run.blocks.get(id(g)))
            self._wrote()
        return out

    def fence(self, g, ins) -> None:
        """A block-scope fence (`__threadfence_block()`: membar.cta, fence.*.cta) orders nothing a peer GPU
        sees: it is no fence here. gpu and sys scopes order peer traffic (__threadfence() is accepted as
        LLM-written kernels use it, though the PTX model asks for .sys across GPUs)."""
        if "cta" in ins.parts:
            return
        block = self.run.blocks.get(id(g))
        self.run.work.synchronised(block)
        self.run.work.fence(block, "sys_fences" if "sys" in ins.parts else "gpu_fences")
        emit(self.ctx.world, Event("fence", self.ctx.rank, site_of(ins.loc), self.run.where(g),
                                   sem="acq_rel"))

    def _poll(self, a: Access, site: str, observed: bytes) -> None:
        self.run.work.polled = True
        prev = self.run.polls.get((a.lo, a.hi))
        repeats = prev.repeats + 1 if prev is not None and prev.observed == observed else 0
        self.run.polls[(a.lo, a.hi)] = Poll(observed, repeats, a.label(), a.writers())
        self.run.poll_site = site

    def _holding(self, accs: list[Access], site: str, where: str):
        """A write waits until the peers spinning on its words have read them, and lands in the same step
        (pkbsim.device.spin_handoff.writing)."""
        return spin_handoff.writing(self.ctx, [(a.lo, a.hi, a.region.owner if a.region is not None else None)
                                               for a in accs], site, where)

    def _wrote(self) -> None:
        with self.ctx.world.lock:
            self.ctx.world.changed()


_REDUCIBLE = {"add", "min", "max", "and", "or", "xor", "inc", "dec"}


def _reduction(op: str, quals: set) -> bool:
    """An update the GPU runs as a fire-and-forget reduction: PTX `red`, or a relaxed `atom` of a reducible op
    (ptxas emits RED where the old value is unused, e.g. atomicAdd as a counter; measured 3x the rate of
    value-returning atomics on an H200). A CAS, an exchange or an ordered atomic returns its value."""
    return "red" in quals or (op in _REDUCIBLE and not quals & {"acquire", "release", "acq_rel"})


def _nonzero(data: bytes) -> int:
    return int(any(data))
