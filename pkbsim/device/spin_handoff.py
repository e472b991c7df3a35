"""A rank spinning on a flag reads each value the flag takes before another rank changes it again.

On the GPU a spinning thread re-reads its flag every few hundred nanoseconds, and the few instructions
between a rank's arrival at a barrier and its first poll take nanoseconds; a peer's next write to the same
flag comes after a poll, a kernel launch or a phase of work (microseconds). pkb's ranks are threads the host
schedules as it likes, so a fast rank can pass a barrier and arrive at the next one before a slow rank has
read the count that let it pass. A wait for an exact value (ThunderKittens' barrier: add 1 on every rank,
wait until the own counter is exactly N, subtract N) then misses N and hangs, in a schedule the GPU does not
run. Two rules keep the schedule to what the GPU does:
- a write to a word another rank spins on waits until that rank has read the value the word holds now;
- a rank that has just changed a flag with an atomic (an arrival) reads its flags next: writes to small
  words of its memory wait until it has polled once (or blocked, or its kernel ended), unless the writer is
  itself in an arrival that began earlier (ranks arriving at one barrier together never hold each other in
  a circle: the older arrival goes first).

The rules only order: a held write goes ahead when the whole world is otherwise stuck (`Wait.escape`), so
they never make a deadlock of their own. What they give up: executions where a poller misses a value
because two writes land within one poll interval (see docs/device_code.md).
"""
from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass, field

from pkbsim.world.plugins import WorldState
from pkbsim.world.world import Wait

FLAG_BYTES = 8  # a write this small may be a flag a rank polls; larger ones are data and never held


@dataclass
class Watches:
    """Per rank, the words it spins on in its running kernel and the bytes it last read there; the ranks that
    arrived (changed a flag with an atomic) and have not polled since."""
    by_rank: dict[int, dict[tuple[int, int], bytes]] = field(default_factory=dict)
    arriving: dict[int, int] = field(default_factory=dict)  # rank -> when its arrival began (a sequence number)
    arrivals: int = 0
    held_writers: int = 0  # writes waiting for a poller: a poll then re-checks them


WATCHES = WorldState(lambda world: Watches())


def _update(ctx, change) -> None:
    world, w = ctx.world, WATCHES.of(ctx.world)
    with world.lock:
        change(w)
        if w.held_writers:
            world.changed()


def polled(ctx, lo: int, hi: int, observed: bytes) -> None:
    """The rank read `observed` at [lo, hi) in a spin loop (call under the world lock of the read)."""
    def change(w: Watches) -> None:
        w.by_rank.setdefault(ctx.rank, {})[(lo, hi)] = observed
        w.arriving.pop(ctx.rank, None)
    _update(ctx, change)


def spinning_on(ctx, observed: dict[tuple[int, int], bytes]) -> None:
    """The rank blocks spinning on exactly these words: words it polled before and left are no longer watched."""
    def change(w: Watches) -> None:
        w.by_rank[ctx.rank] = dict(observed)
        w.arriving.pop(ctx.rank, None)
    _update(ctx, change)


def atomic(ctx, words: list[tuple[int, int]], before: list[bytes], after: list[bytes]) -> None:
    """The rank's atomic on `words`: one that changed memory is an arrival (the rank moved on from its spins),
    one that changed nothing a poll. Call under the world lock that made the atomic."""
    if before == after:
        for (lo, hi), seen in zip(words, after):
            polled(ctx, lo, hi, seen)
        return

    def change(w: Watches) -> None:
        w.by_rank.pop(ctx.rank, None)
        if ctx.rank not in w.arriving:
            w.arrivals += 1
            w.arriving[ctx.rank] = w.arrivals
    _update(ctx, change)


def moved_on(ctx) -> None:
    """The rank is about to write memory (spin_handoff.writing): it no longer spins on what it polled."""
    if ctx.rank in WATCHES.of(ctx.world).by_rank:
        _update(ctx, lambda w: w.by_rank.pop(ctx.rank, None))


def kernel_ended(ctx) -> None:
    """The rank's kernel ended: it watches nothing and arrives nowhere."""
    def change(w: Watches) -> None:
        w.by_rank.pop(ctx.rank, None)
        w.arriving.pop(ctx.rank, None)
    _update(ctx, change)


def _missed(w: Watches, writer: int, lo: int, hi: int, owner: int | None) -> set[int]:
    """The ranks the write of [lo, hi) in `owner`'s memory must wait for."""
    ranks = {rank for rank, words in list(w.by_rank.items()) if rank != writer
             for (a, b), seen in list(words.items()) if a < hi and lo < b and ctypes.string_at(a, b - a) != seen}
    began = w.arriving.get(owner)
    if began is not None and owner != writer and hi - lo <= FLAG_BYTES and began < w.arriving.get(writer, began + 1):
        ranks.add(owner)
    return ranks


@contextlib.contextmanager
def writing(ctx, words: list[tuple[int, int, int | None]], site: str, where: str):
    """Hold the rank's write of `words` ([lo, hi) in `owner`'s symmetric memory, or None) until the ranks that
    must read first have read, then run the body (the write) under the world lock: the check and the write are
    one step, so two writers cannot both pass the check before either has written (two arrivals landing on a
    count its poller has yet to read)."""
    world, w = ctx.world, WATCHES.of(ctx.world)
    moved_on(ctx)  # a rank that writes has left its spin loops: nobody waits for it to re-read them

    def missed() -> set[int]:
        return {r for lo, hi, owner in words for r in _missed(w, ctx.rank, lo, hi, owner)}

    with world.lock:
        if (w.by_rank or w.arriving) and missed():
            _hold(ctx, missed, site, where)
        yield


def _hold(ctx, missed, site: str, where: str) -> None:
    """Block (under the world lock, which the wait releases) until nobody `missed` names must read first, or
    the world is otherwise stuck."""
    world, w = ctx.world, WATCHES.of(ctx.world)
    released: list[bool] = []
    w.held_writers += 1
    try:
        world.block(ctx.rank, Wait(
            what=f"{where} writing a flag a peer has yet to read", site=site,
            ready=lambda: bool(released) or not missed(),
            waits_for=missed, kind="protocol", escape=lambda: not released.append(True)))
    finally:
        w.held_writers -= 1
