"""The per-world device state and the one entry point every IR producer calls: `emit`.

`emit` appends the event to the rank's IR stream, moves vector clocks for signals and waits, checks data
accesses for races and counts peer bytes for the cost model. Producers: pkbsim.device.lower_symm (host
calls, ops, host tensor ops on symmetric buffers) and pkbsim.device.triton_memory (interpreted kernels).
"""
from __future__ import annotations

from collections import defaultdict

from pkbsim.device.ir import Event, ProtocolLog
from pkbsim.device.memory_map import MemoryMap
from pkbsim.device.races import RaceDetector, RunEvents
from pkbsim.symm.allocations import state as symm_state
from pkbsim.world.findings import Finding
from pkbsim.world.plugins import WorldState
from pkbsim.world.world import SimAbort

_RELEASING = {"release", "acq_rel"}
_ACQUIRING = {"acquire", "acq_rel"}


class DeviceState:
    def __init__(self, world):
        self.world = world
        self.memory = MemoryMap(symm_state(world))
        self.log = ProtocolLog(world.size)
        self.races = RaceDetector(world.clocks)
        # flag word (pad or buffer address) -> join of the clocks released into it, and the last relaxed writer
        self.flag_clock: dict[int, tuple[int, ...]] = {}
        self.relaxed_flag: dict[int, Event] = {}
        # rank -> peer -> (flag write, poll) observed without release/acquire: explains a later race (D4)
        self.unordered_flags: dict[int, dict[int, tuple[Event | None, Event]]] = defaultdict(dict)
        # slot reuse (D2): per flag, how often it was set (a non-zero write) and the last write; per waiter
        # (a rank's host, or one block of its kernel: the event's `where`; each block that waits consumes the
        # same set once), the flag its last poll saw set (a wait in progress) and its completed waits per flag
        self.flag_writes: dict[int, tuple[int, Event]] = {}
        self.polling: dict[tuple[int, str], tuple[int, Event]] = {}
        self.waits_done: dict[tuple[int, str, int], int] = {}
        # fences (CUDA kernels), per clock thread (a rank, or a block of its kernel): flags it polled without
        # acquire since its last fence, and the threads whose last fence came after their last data write
        # (their next relaxed flag write releases)
        self.relaxed_polls: dict[int, set[int]] = defaultdict(set)
        self.fenced: set[int] = set()


WORLD_STATE = WorldState(DeviceState)


def device_state(world) -> DeviceState:
    return WORLD_STATE.of(world)


def emit(world, ev: Event, region=None, flag_addr: int | None = None) -> None:
    """Record one IR event of rank ev.rank (takes the world lock; may raise SimAbort on a race)."""
    st = device_state(world)
    with world.lock:
        st.log.append(ev)
        if ev.kind == "put":
            st.fenced.discard(world.clocks.thread(ev.rank))
        if ev.kind in ("put", "get") and region is not None and not region.on_pad:
            _wait_completed(world, st, ev)
            _check_race(world, st, region, ev)
        elif ev.kind == "fence":
            _fence(world, st, ev)
        elif ev.kind == "signal" and flag_addr is not None:
            _signal(world, st, ev, flag_addr)
        elif ev.kind == "wait" and flag_addr is not None:
            _observe(world, st, ev, flag_addr)


def emit_data(world, kind: str, rank: int, site: str, where: str, region, runs: list, call: int = 0) -> None:
    """The get/put events of one data access of a symmetric buffer, one per run of bytes [lo, hi) (addresses),
    as `emit` of each in turn would record them; the race check takes the runs together where it can
    (RaceDetector.access_runs), since a strided warp access is hundreds of them."""
    base = region.base
    if len(runs) < 4 or region.on_pad:
        for lo, hi in runs:
            emit(world, Event(kind, rank, site, where, region.owner, lo - base, hi - base, call=call), region)
        return
    st = device_state(world)
    group = RunEvents(kind, rank, site, where, region.owner, runs, base, call)
    with world.lock:
        if not st.races.access_runs(region.alloc, group, kind == "put", before=lambda: _opened(world, st, group)):
            for k in range(len(runs)):
                emit(world, group.event(k), region)


def _opened(world, st: DeviceState, group: RunEvents) -> None:
    """What `emit` does for each run before its race check, for all of them (a run after the first completes no wait)."""
    first = group.event(0)
    st.log.append(first)
    if group.kind == "put":
        st.fenced.discard(world.clocks.thread(group.rank))
    _wait_completed(world, st, first)
    st.log.extend(group.rank, lambda k: group.event(k + 1), len(group.runs) - 1)


def kernel_end_fence(ctx, clocks, site: str, name: str) -> None:
    """The end of a kernel orders what its blocks polled before whatever runs after it on the stream, as a
    fence would: the GPU drains a grid's memory operations and invalidates its L1 caches between launches,
    so a flag a block saw set (a relaxed poll, ThunderKittens' barrier wait) acquires the writes released
    into it for the next kernel. Within the kernel a relaxed poll still orders nothing (D4). Call under the
    world lock, with the launch's clock threads (pkbsim.world.clocks.KernelClocks) before they finish."""
    if ctx.world.failed:
        return
    for t in sorted(clocks.used) or [clocks.stream]:
        with clocks.running(t):
            emit(ctx.world, Event("fence", ctx.rank, site, f"end of {name}", sem="acq_rel"))


def _signal(world, st: DeviceState, ev: Event, addr: int) -> None:
    st.flag_writes[addr] = (st.flag_writes.get(addr, (0, ev))[0] + bool(ev.value), ev)
    if ev.sem in _RELEASING or world.clocks.thread(ev.rank) in st.fenced:
        published = world.clocks.release(ev.rank)
        old = st.flag_clock.get(addr)
        st.flag_clock[addr] = published if old is None else tuple(max(a, b) for a, b in zip(old, published))
        st.relaxed_flag.pop(addr, None)
    elif ev.value:  # a flag set without release ordering: a reader that sees it synchronises with nothing
        st.relaxed_flag[addr] = ev
    else:  # a reset (a consumer clearing the flag) does not end what earlier releases published
        st.relaxed_flag.pop(addr, None)
    world.changed()


def _observe(world, st: DeviceState, ev: Event, addr: int) -> None:
    """A poll: acquire what was released into the flag, or note the missing ordering."""
    write = st.flag_writes.get(addr)
    if ev.value and write is not None and write[1].rank != ev.rank:
        st.polling[ev.rank, ev.where] = (addr, ev)
    else:
        st.polling.pop((ev.rank, ev.where), None)
    clock = st.flag_clock.get(addr)
    relaxed = st.relaxed_flag.get(addr)
    if ev.sem in _ACQUIRING and clock is not None:
        world.clocks.acquire(ev.rank, clock)
        return
    st.relaxed_polls[world.clocks.thread(ev.rank)].add(addr)
    if relaxed is not None and relaxed.rank != ev.rank:
        st.unordered_flags[ev.rank][relaxed.rank] = (relaxed, ev)
    elif clock is not None:
        for peer in world.clocks.ranks_ahead(ev.rank, clock):
            st.unordered_flags[ev.rank][peer] = (None, ev)


def _fence(world, st: DeviceState, ev: Event) -> None:
    """A fence after relaxed polls acquires what was released into the flags they saw; a fence after
    the rank's data writes makes its next relaxed flag write a release (the CUDA idiom: write data,
    __threadfence_system(), set the flag; poll the flag, fence, read the data)."""
    me = world.clocks.thread(ev.rank)
    for addr in st.relaxed_polls.pop(me, ()):
        clock = st.flag_clock.get(addr)
        if clock is not None:
            world.clocks.acquire(ev.rank, clock)
    unordered = st.unordered_flags.get(ev.rank, {})
    for peer in [p for p, (set_by, _) in unordered.items() if set_by is None]:
        del unordered[peer]
    st.fenced.add(me)


def _wait_completed(world, st: DeviceState, ev: Event) -> None:
    """The waiter moved on from polling a set flag to data: its wait ended on that flag. More completed waits
    than the flag was ever set means one set satisfied two waits: the slot is reused without a reset (D2).
    (A monotonic flag, e.g. an epoch counter that one write can carry two rounds ahead, is fine.)"""
    polled = st.polling.pop((ev.rank, ev.where), None)
    if polled is None:
        return
    addr, poll = polled
    done = st.waits_done.get((ev.rank, ev.where, addr), 0) + 1
    if done > st.flag_writes[addr][0]:
        setter = st.flag_writes[addr][1]
        msg = (f"stale flag: rank {ev.rank}'s wait in {poll.where} at {poll.site} passed on the flag value rank "
               f"{setter.rank} set at {setter.site}, which an earlier wait of rank {ev.rank} already consumed: the "
               f"slot is reused without a reset (clear the flag after the wait, or wait for a per-round value)")
        world.fail(Finding("protocol", msg, sorted({ev.rank, setter.rank}), [poll.site, setter.site]),
                   unless_failed=True)
        raise SimAbort(msg)
    st.waits_done[ev.rank, ev.where, addr] = done


def _check_race(world, st: DeviceState, region, ev: Event) -> None:
    hit = st.races.access(region.alloc, ev, ev.kind == "put")
    if hit is None:
        return
    earlier, what = hit
    msg = _race_message(st, ev, earlier, what)
    world.fail(Finding("race", msg, sorted({ev.rank, earlier.rank}), [ev.site, earlier.site],
                       [earlier.describe(), ev.describe()], calls=[earlier.call, ev.call]), unless_failed=True)
    raise SimAbort(msg)


def _race_message(st: DeviceState, ev: Event, earlier: Event, what: str) -> str:
    span = f"rank {ev.owner}'s symmetric buffer bytes [{ev.lo}, {ev.hi})"
    if what == "stale read":
        msg = (f"stale read: rank {ev.rank} reads {span} in {ev.where} at {ev.site}, but rank {earlier.rank}'s "
               f"write in {earlier.where} at {earlier.site} is not ordered before it (no signal/wait, barrier or "
               f"collective between them on the stream that reads, nor on one it waited for): wait for rank "
               f"{earlier.rank}'s signal after its write, on that stream or one it waits for (wait_stream, an event)")
    elif what == "write after read":
        msg = (f"unordered write after read: rank {ev.rank} writes {span} in {ev.where} at {ev.site}, which rank "
               f"{earlier.rank} reads in {earlier.where} at {earlier.site} with no synchronisation between them: "
               f"the read can see the old or the new data (a stale read if the write was meant to come first, an "
               f"overwrite of a buffer still in use if the read was): order them with a signal/wait or a barrier")
    else:
        msg = (f"write-write race: ranks {earlier.rank} and {ev.rank} both write {span} ({earlier.where} at "
               f"{earlier.site}; {ev.where} at {ev.site}) with no ordering between them")
    reader = ev.rank if what == "stale read" else earlier.rank
    writer = earlier.rank if what == "stale read" else ev.rank
    flag = st.unordered_flags.get(reader, {}).get(writer)
    if flag is not None:
        set_by, poll = flag
        side = (f"the flag was set without release ordering at {set_by.site}" if set_by is not None
                else f"the flag was polled without acquire ordering at {poll.site}")
        msg += (f"; rank {reader} saw rank {writer}'s flag but {side}: data and flag are not ordered (use "
                f"sem='release' for the flag write and sem='acquire' for the poll)")
    return msg
