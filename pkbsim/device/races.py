"""Happens-before race detection on symmetric buffers, with vector clocks (FastTrack-style epochs).

Each buffer word keeps its last writer (clock thread, epoch, access) and each rank's last read (thread,
epoch), in pages made on first touch, one cell per page while its words share one state (memory in
proportion to the accesses, not to the buffer). An access with clock V is ordered after an earlier access
by thread q at epoch e iff V[q] >= e. Threads are the ranks' streams and the blocks of their kernels (pkbsim.world.clocks). Unordered pairs of different
ranks with at least one write are races: a read of a peer's unordered write is a stale read (D5), a write
over a peer's unordered read is a write-after-read (D6), two unordered writes collide. Releases (signals,
put_signal) and acquires (waits) move clocks; collectives join them (pkbsim.world.comms). One read per
rank and word is kept (the last), so a race with an earlier read of another block can be missed.
"""
from __future__ import annotations

import numpy as np

from pkbsim.device.ir import Event

# bytes per shadow cell. A known limit: two ranks' unordered stores of adjacent 2-byte elements that share a
# 4-byte word are taken for a write-write race. 2 would double the shadow state (about 160 bytes a cell with
# 8 ranks' reads), too much for buffers of 100 MB
WORD = 4
PAGE = 4096  # shadow cells per page: pages are made on first touch, so memory follows what is touched


_FIELDS = ("writer", "write_epoch", "write_event", "read_epoch", "read_thread", "read_event")


class _Page:
    """The shadow of PAGE words: last writer (clock thread, epoch, event) and each rank's last read. While
    all its words share one state (untouched, or wholly covered by its last write, e.g. a host fill of the
    whole buffer) the page keeps a single cell for them; a partial access expands it."""

    def __init__(self, world_size: int):
        self.world_size = world_size
        self.collapse()

    def collapse(self) -> None:
        """Back to one never-touched cell (before a write that covers the whole page)."""
        self.uniform = True
        self.writer = np.full(1, -1, dtype=np.int16)  # clock thread
        self.write_epoch = np.zeros(1, dtype=np.int64)
        self.write_event = np.zeros(1, dtype=np.int64)
        self.read_epoch = np.zeros((self.world_size, 1), dtype=np.int64)  # per rank: epoch + 1; 0 = never read
        self.read_thread = np.zeros((self.world_size, 1), dtype=np.int16)
        self.read_event = np.zeros((self.world_size, 1), dtype=np.int64)

    def cells(self, a: int, b: int, expand: bool = False) -> tuple[int, int]:
        """The cells that hold words [a, b); with `expand`, a uniform page only partly covered gets a cell
        per word first (to be updated)."""
        if self.uniform and expand and (a, b) != (0, PAGE):
            for name in _FIELDS:
                setattr(self, name, np.repeat(getattr(self, name), PAGE, axis=-1))
            self.uniform = False
        return (0, 1) if self.uniform else (a, b)


class _Shadow:
    """The pages of one symmetric buffer, by page number (a 1 GiB buffer costs nothing until touched)."""

    def __init__(self, world_size: int):
        self.world_size = world_size
        self.pages: dict[int, _Page] = {}

    def pieces(self, a: int, b: int, create: bool = False):
        """(page, first cell, end cell) covering cells [a, b); pages never touched are left out unless
        `create`."""
        for n in range(a // PAGE, (b - 1) // PAGE + 1):
            page = self.pages.get(n)
            if page is None:
                if not create:
                    continue
                page = self.pages[n] = _Page(self.world_size)
            yield page, max(a, n * PAGE) - n * PAGE, min(b, (n + 1) * PAGE) - n * PAGE


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
            sh = self._shadows[id(alloc)] = _Shadow(self.size)
        return sh

    def access(self, alloc, ev: Event, write: bool) -> tuple[Event, str] | None:
        """Record ev, made by rank ev.rank's current clock thread; return (the earlier conflicting access,
        what kind of race) if it races."""
        sh = self._shadow(alloc)
        a, b = ev.lo // WORD, max(ev.lo // WORD + 1, (ev.hi + WORD - 1) // WORD)
        r, t = ev.rank, self.clocks.thread(ev.rank)
        clock = self.clocks.vc[t]
        vc = np.asarray(clock, dtype=np.int64)
        for page, lo, hi in sh.pieces(a, b):
            hit = self._conflict(page, *page.cells(lo, hi), vc, r, write)
            if hit is not None:
                return self._events[hit[0]], hit[1]
        self._events.append(ev)
        n = len(self._events) - 1
        for page, lo, hi in sh.pieces(a, b, create=True):
            if write and (lo, hi) == (0, PAGE):
                page.collapse()
            lo, hi = page.cells(lo, hi, expand=True)
            if write:
                page.writer[lo:hi], page.write_epoch[lo:hi], page.write_event[lo:hi] = t, clock[t], n
                page.read_epoch[:, lo:hi] = 0
            else:
                page.read_epoch[r, lo:hi], page.read_thread[r, lo:hi], page.read_event[r, lo:hi] = clock[t] + 1, t, n
        return None

    def _conflict(self, page: _Page, a: int, b: int, vc: np.ndarray, r: int, write: bool) -> tuple[int, str] | None:
        """(event index, kind) of an earlier access in cells [a, b) of `page` not ordered before clock `vc`."""
        writers = page.writer[a:b]
        foreign = (writers >= 0) & (self._rank_of[writers] != r)
        if foreign.any():
            idx = np.nonzero(foreign)[0]
            unordered = vc[writers[idx]] < page.write_epoch[a:b][idx]
            if unordered.any():
                first = idx[np.argmax(unordered)]
                return int(page.write_event[a + first]), ("write-write" if write else "stale read")
        if write:
            reads = page.read_epoch[:, a:b]
            late = reads > vc[page.read_thread[:, a:b]] + 1
            late[r] = False
            if late.any():
                q, w = np.argwhere(late)[0]
                return int(page.read_event[q, a + w]), "write after read"
        return None
