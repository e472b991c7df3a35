"""Spin-wait detection: a rank that keeps re-reading unchanged flags is blocked on those addresses.

Interpreted kernels spin in Python; instead of burning the CPU (and hanging when nothing will ever
write), a rank whose polls of the same bytes return the same value SPIN_LIMIT times in a row, with no
write of its own in between, blocks in the world's wait-for check until one of the polled addresses
changes. A wait nothing can satisfy then ends in the usual deadlock report, naming the address.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field

from pkbsim.device import spin_handoff
from pkbsim.world.world import Wait

SPIN_LIMIT = 4


@dataclass
class Poll:
    observed: bytes
    repeats: int
    label: str  # "rank 3 signal pad, channel 0, slot 5"
    waits_for: set[int]


@dataclass
class PollSet:
    """The polls of the running program since its last side effect."""
    polls: dict[tuple[int, int], Poll] = field(default_factory=dict)

    def clear(self) -> None:
        self.polls.clear()


def _changed(polls: dict[tuple[int, int], Poll]) -> bool:
    return any(ctypes.string_at(lo, hi - lo) != p.observed for (lo, hi), p in polls.items())


def poll(ctx, pollset: PollSet, lo: int, hi: int, observed: bytes, label: str, waits_for: set[int], site: str,
         where: str, has_pending: Callable[[], bool], run_pending: Callable[[], object]) -> None:
    """Note one poll of bytes [lo, hi); block the rank when it is spinning on unchanged memory."""
    prev = pollset.polls.get((lo, hi))
    repeats = prev.repeats + 1 if prev is not None and prev.observed == observed else 0
    pollset.polls[(lo, hi)] = Poll(observed, repeats, label, waits_for)
    if repeats < SPIN_LIMIT:
        return
    polls = dict(pollset.polls)
    escaped = block_on(ctx, polls, site, where, has_pending)
    pollset.clear()
    if escaped:  # nothing else could move: a later program of the launch may be the writer, run it now
        run_pending()


def block_on(ctx, polls: dict[tuple[int, int], Poll], site: str, where: str, can_escape: Callable[[], bool]) -> bool:
    """Block the rank until one of the polled byte ranges changes. When the whole world is stuck and
    `can_escape()` (the kernel has work of its own it could still run), return True instead."""
    escaped = []
    shown = [f"{p.label} = 0x{p.observed.hex()}" for p in list(polls.values())[:4]]
    values = "; ".join(shown) + (f" and {len(polls) - 4} more" if len(polls) > 4 else "")
    peers = set().union(*(p.waits_for for p in polls.values()))
    spin_handoff.spinning_on(ctx, {word: p.observed for word, p in polls.items()})
    ctx.world.block(ctx.rank, Wait(
        what=f"{where} spinning on {values}", site=site, ready=lambda: bool(escaped) or _changed(polls),
        waits_for=lambda: peers,
        explain=lambda: "the kernel re-reads memory that no rank will write again" + (
            f" (it expects a write from rank{'s' if len(peers) > 1 else ''} {', '.join(map(str, sorted(peers)))})"
            if peers else ""),
        kind="protocol", escape=lambda: can_escape() and not escaped.append(True)))
    return bool(escaped)
