"""Happens-before race detection on symmetric buffers, with vector clocks (FastTrack-style epochs).

Each buffer word keeps its last writer (rank, epoch, access) and each rank's last read epoch. An access
by rank r with clock V is ordered after an earlier access by q at epoch e iff V[q] >= e. Unordered pairs
with at least one write are races: a read of a peer's unordered write is a stale read (D5), a write over
a peer's unordered read is a write-after-read (D6), two unordered writes collide. Releases (signals,
put_signal) and acquires (waits) move clocks; collectives join them (pkbsim.world.comms).
"""
from __future__ import annotations

import numpy as np

from pkbsim.device.ir import Event

WORD = 4  # bytes per shadow cell


def release(world, rank: int) -> tuple[int, ...]:
    """The clock a release publishes; later accesses of the rank get a newer epoch than it carries."""
    vc = world.clocks.vc[rank]
    published = tuple(vc)
    vc[rank] += 1
    return published


class _Shadow:
    def __init__(self, nbytes: int, world_size: int):
        words = max(1, (nbytes + WORD - 1) // WORD)
        self.writer = np.full(words, -1, dtype=np.int16)
        self.write_epoch = np.zeros(words, dtype=np.int64)
        self.write_event = np.zeros(words, dtype=np.int64)
        self.read_epoch = np.zeros((world_size, words), dtype=np.int64)  # epoch + 1; 0 = never read
        self.read_event = np.zeros((world_size, words), dtype=np.int64)


class RaceDetector:
    def __init__(self, world_size: int):
        self.size = world_size
        self._shadows: dict[int, _Shadow] = {}
        self._events: list[Event] = []  # accesses referenced by the shadows

    def _shadow(self, alloc) -> _Shadow:
        sh = self._shadows.get(id(alloc))
        if sh is None:
            sh = self._shadows[id(alloc)] = _Shadow(alloc.tensor.untyped_storage().nbytes(), self.size)
        return sh

    def access(self, alloc, ev: Event, clock: list[int], write: bool) -> tuple[Event, str] | None:
        """Record ev; return (the earlier conflicting access, what kind of race) if it races."""
        sh = self._shadow(alloc)
        a, b = ev.lo // WORD, max(ev.lo // WORD + 1, (ev.hi + WORD - 1) // WORD)
        vc = np.asarray(clock, dtype=np.int64)
        r = ev.rank
        writers = sh.writer[a:b]
        foreign = (writers >= 0) & (writers != r)
        if foreign.any():
            idx = np.nonzero(foreign)[0]
            unordered = vc[writers[idx]] < sh.write_epoch[a:b][idx]
            if unordered.any():
                first = idx[np.argmax(unordered)]
                return self._events[sh.write_event[a + first]], ("write-write" if write else "stale read")
        if write:
            reads = sh.read_epoch[:, a:b]
            late = reads > (vc[:, None] + 1)
            late[r] = False
            if late.any():
                q, w = np.argwhere(late)[0]
                return self._events[sh.read_event[q, a + w]], "write after read"
        self._events.append(ev)
        n = len(self._events) - 1
        epoch = clock[r] + 1
        if write:
            sh.writer[a:b], sh.write_epoch[a:b], sh.write_event[a:b] = r, clock[r], n
            sh.read_epoch[:, a:b] = 0
        else:
            sh.read_epoch[r, a:b], sh.read_event[r, a:b] = epoch, n
        return None
