"""Happens-before race detection on symmetric buffers, with vector clocks (FastTrack-style epochs).

Each buffer word keeps its last writer (clock thread, epoch, access) and each rank's last read (thread,
epoch). An access with clock V is ordered after an earlier access by thread q at epoch e iff V[q] >= e.
Threads are ranks and the blocks of their kernels (pkbsim.world.clocks). Unordered pairs of different
ranks with at least one write are races: a read of a peer's unordered write is a stale read (D5), a write
over a peer's unordered read is a write-after-read (D6), two unordered writes collide. Releases (signals,
put_signal) and acquires (waits) move clocks; collectives join them (pkbsim.world.comms). One read per
rank and word is kept (the last), so a race with an earlier read of another block can be missed.
"""
from __future__ import annotations

import numpy as np

from pkbsim.device.ir import Event

WORD = 4  # bytes per shadow cell


class _Shadow:
    def __init__(self, nbytes: int, world_size: int):
        words = max(1, (nbytes + WORD - 1) // WORD)
        self.writer = np.full(words, -1, dtype=np.int16)  # clock thread
        self.write_epoch = np.zeros(words, dtype=np.int64)
        self.write_event = np.zeros(words, dtype=np.int64)
        self.read_epoch = np.zeros((world_size, words), dtype=np.int64)  # per rank: epoch + 1; 0 = never read
        self.read_thread = np.zeros((world_size, words), dtype=np.int16)
        self.read_event = np.zeros((world_size, words), dtype=np.int64)


class RaceDetector:
    def __init__(self, clocks):
        self.clocks = clocks
        self.size = clocks.ranks
        self._rank_of = np.array([clocks.rank_of(t) for t in range(len(clocks.vc))], dtype=np.int64)
        self._shadows: dict[int, _Shadow] = {}
        self._events: list[Event] = []  # accesses referenced by the shadows

    def _shadow(self, alloc) -> _Shadow:
        sh = self._shadows.get(id(alloc))
        if sh is None:
            sh = self._shadows[id(alloc)] = _Shadow(alloc.tensor.untyped_storage().nbytes(), self.size)
        return sh

    def access(self, alloc, ev: Event, write: bool) -> tuple[Event, str] | None:
        """Record ev, made by rank ev.rank's current clock thread; return (the earlier conflicting access,
        what kind of race) if it races."""
        sh = self._shadow(alloc)
        a, b = ev.lo // WORD, max(ev.lo // WORD + 1, (ev.hi + WORD - 1) // WORD)
        r, t = ev.rank, self.clocks.thread(ev.rank)
        clock = self.clocks.vc[t]
        vc = np.asarray(clock, dtype=np.int64)
        writers = sh.writer[a:b]
        foreign = (writers >= 0) & (self._rank_of[writers] != r)
        if foreign.any():
            idx = np.nonzero(foreign)[0]
            unordered = vc[writers[idx]] < sh.write_epoch[a:b][idx]
            if unordered.any():
                first = idx[np.argmax(unordered)]
                return self._events[sh.write_event[a + first]], ("write-write" if write else "stale read")
        if write:
            reads = sh.read_epoch[:, a:b]
            late = reads > vc[sh.read_thread[:, a:b]] + 1
            late[r] = False
            if late.any():
                q, w = np.argwhere(late)[0]
                return self._events[sh.read_event[q, a + w]], "write after read"
        self._events.append(ev)
        n = len(self._events) - 1
        if write:
            sh.writer[a:b], sh.write_epoch[a:b], sh.write_event[a:b] = t, clock[t], n
            sh.read_epoch[:, a:b] = 0
        else:
            sh.read_epoch[r, a:b], sh.read_thread[r, a:b], sh.read_event[r, a:b] = clock[t] + 1, t, n
        return None
