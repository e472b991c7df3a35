"""Happens-before race detection on symmetric buffers, with vector clocks (FastTrack-style epochs).

Each buffer word keeps its last write and each rank's last read (the access's index; the detector keeps its
clock thread, epoch and rank), in pages made on first touch, one cell per page while its words share one
state (memory in proportion to the accesses, not to the buffer). A word that an access covers only in part is split into
halves or bytes, so that ranks storing adjacent bf16 or int8 elements of one word do not race. An access
with clock V is ordered after an earlier access by thread q at epoch e iff V[q] >= e. Threads are the
ranks' streams and the blocks of their kernels (pkbsim.world.clocks). Unordered pairs of different ranks
with at least one write are races: a read of a peer's unordered write is a stale read (D5), a write over a
peer's unordered read is a write-after-read (D6), two unordered writes collide. Releases (signals,
put_signal) and acquires (waits) move clocks; collectives join them (pkbsim.world.comms). One read per
rank and word (or part of a split word) is kept (the last), so a race with an earlier read of another
block can be missed.
"""
from __future__ import annotations

import bisect
import weakref

import numpy as np

from pkbsim.device.ir import Event

# bytes per shadow cell. Accesses of whole words (nearly all) cost one cell a word; a word that an access
# covers only in part (adjacent bf16 or int8 elements of different ranks) is split, by a side table of its
# page, into halves or bytes, so that disjoint bytes never race. Cells of 2 bytes throughout would be exact
# too but double the shadow state
WORD = 4
PAGE = 4096  # shadow cells per page: pages are made on first touch, so memory follows what is touched
NEVER = 0  # the event index of "no access": the detector's event 0, ordered before every clock


class _Cells:
    """Shadow cells: the index of the event of each one's last write and, for each rank that has read any of
    them, of its last read (NEVER: none). An event's clock thread, epoch and rank are kept once, by the
    detector, not per cell: a cell is 4 bytes plus 4 a reading rank, since strided reads expand most pages of
    large buffers."""

    def __init__(self, n: int):
        self.write = np.zeros(n, dtype=np.int32)
        self.ranks: list[int] = []  # the ranks with a row in `reads`, ascending (a race is reported by rank)
        self.reads = np.zeros((0, n), dtype=np.int32)

    def row(self, r: int) -> int:
        """Rank r's row of `reads`, made (as never read) if it has none."""
        if r in self.ranks:
            return self.ranks.index(r)
        pos = bisect.bisect(self.ranks, r)
        self.ranks.insert(pos, r)
        none = np.zeros((1, self.reads.shape[1]), np.int32)  # NEVER (np.insert: twice the time)
        self.reads = np.concatenate((self.reads[:pos], none, self.reads[pos:]))
        return pos

    def copy(self, dst, src: _Cells, at) -> None:
        """Cells `dst` take the state of cells `at` of `src`."""
        self.write[dst] = src.write[at]
        for k, q in enumerate(self.ranks):
            if q not in src.ranks:
                self.reads[k, dst] = NEVER
        for k, q in enumerate(src.ranks):
            row = self.row(q)  # first: it may replace `reads`
            self.reads[row, dst] = src.reads[k, at]

    def record(self, ix, write: bool, r: int, n) -> None:
        """Access event n (an index, or one per cell) by rank r over cells `ix` (a slice or indices)."""
        if write:
            self.write[ix] = n
            if self.ranks:
                self.reads[:, ix] = NEVER
        else:
            k = self.row(r)  # first: it may replace `reads`
            self.reads[k, ix] = n


class _Store(_Cells):
    """The extra cells of a page's split words, `per` a word (1: its second half; 3: its bytes 1 to 3; the
    first unit stays in the word's own cell). Grows by doubling; slots of words made whole again are reused."""

    def __init__(self, per: int):
        super().__init__(0)
        self.per, self.used, self.free = per, 0, []

    def alloc(self) -> int:
        if self.free:
            return self.free.pop()
        if self.used * self.per == self.write.shape[-1]:
            more = max(8, self.used) * self.per
            self.write = np.concatenate((self.write, np.zeros(more, np.int32)))
            self.reads = np.concatenate((self.reads, np.zeros((len(self.ranks), more), np.int32)), axis=1)
        self.used += 1
        return self.used - 1


class _Page(_Cells):
    """The shadow of PAGE words: a cell per word (its last write and each rank's last read). While all its
    words share one state (untouched, or wholly covered by its last write, e.g. a host fill of the whole
    buffer) the page keeps a single cell for them; a partial access expands it. A word that an access covers
    only in part is split into halves (2-byte aligned accesses) or bytes: `split[w]` is -1 for a whole word,
    2*slot for halves (slot in `halves`), 2*slot + 1 for bytes (in `bytes`); a write of the whole word makes
    it whole again. Each unit's state holds for all its bytes, so checks are exact at byte granularity."""

    def __init__(self):
        self.collapse()

    def collapse(self) -> None:
        """Back to one never-touched cell (before a write that covers the whole page)."""
        super().__init__(1)
        self.uniform = True
        self.split: np.ndarray | None = None  # made on the first split
        self.splits = 0
        self.halves: _Store | None = None
        self.bytes: _Store | None = None

    def expand(self) -> None:
        """A cell per word (before an access to part of a uniform page); only ranks that read the page since its
        last whole write have a row."""
        self.write = np.full(PAGE, self.write[0], dtype=np.int32)
        self.reads = np.repeat(self.reads, PAGE, axis=1)
        self.uniform = False

    def _units(self, w: int, m0: int, m1: int) -> list:
        """(cells, index) of the units of word w that its bytes [m0, m1) fall in."""
        c = -1 if self.split is None else int(self.split[w])
        if c < 0:
            return [(self, slice(w, w + 1))]
        g, store, per = (2, self.halves, 1) if c % 2 == 0 else (1, self.bytes, 3)
        u0, u1 = m0 // g, -(-m1 // g)
        out = [(self, slice(w, w + 1))] if u0 == 0 else []
        if u1 > max(u0, 1):
            base = (c >> 1) * per - 1
            out.append((store, slice(base + max(u0, 1), base + u1)))
        return out

    def _inner(self, a: int, b: int) -> list:
        """(cells, indices) of the side cells of the split words among words [a, b)."""
        c = self.split[a:b]
        c = c[c >= 0]
        out = []
        if c.size:
            h = c[c % 2 == 0] >> 1
            if h.size:
                out.append((self.halves, h))
            q = c[c % 2 == 1] >> 1
            if q.size:
                out.append((self.bytes, (3 * q[:, None] + np.arange(3)).reshape(-1)))
        return out

    def parts(self, blo: int, bhi: int) -> list:
        """(cells, index) pairs that hold the state of the page's bytes [blo, bhi)."""
        if self.uniform:
            return [(self, slice(0, 1))]
        a, b = blo // WORD, -(-bhi // WORD)
        if not self.splits:
            return [(self, slice(a, b))]  # a whole word's cell holds for each of its bytes
        fa, fb = -(-blo // WORD), bhi // WORD  # the words wholly covered
        if fa > fb:
            return self._units(a, blo - a * WORD, bhi - a * WORD)
        out = self._units(a, blo - a * WORD, WORD) if a < fa else []
        if fa < fb:
            out += [(self, slice(fa, fb)), *self._inner(fa, fb)]
        if fb < b:
            out += self._units(fb, 0, bhi - fb * WORD)
        return out

    def _refine(self, w: int, m0: int, m1: int) -> None:
        """Split word w finely enough that bytes [m0, m1) are whole units."""
        need = 2 if m0 % 2 == 0 and m1 % 2 == 0 else 1
        if self.split is None:
            self.split = np.full(PAGE, -1, dtype=np.int16)  # codes < 2 * PAGE
        c = int(self.split[w])
        if (4 if c < 0 else 2 if c % 2 == 0 else 1) <= need:
            return
        if need == 2:
            self.halves = self.halves or _Store(1)
            s = self.halves.alloc()
            self.halves.copy(s, self, w)
            self.split[w], self.splits = 2 * s, self.splits + 1
            return
        self.bytes = self.bytes or _Store(3)
        s = self.bytes.alloc()
        if c < 0:
            self.bytes.copy(slice(3 * s, 3 * s + 3), self, [w, w, w])
            self.splits += 1
        else:  # halves to bytes: byte 1 as the first half, bytes 2 and 3 as the second
            self.bytes.copy(3 * s, self, w)
            self.bytes.copy(slice(3 * s + 1, 3 * s + 3), self.halves, [c >> 1, c >> 1])
            self.halves.free.append(c >> 1)
        self.split[w] = 2 * s + 1

    def _whole(self, a: int, b: int) -> None:
        """Words [a, b), about to be written whole, become whole words again."""
        c = self.split[a:b]
        sel = c >= 0
        if sel.any():
            codes = c[sel]
            if self.halves is not None:
                self.halves.free += (codes[codes % 2 == 0] >> 1).tolist()
            if self.bytes is not None:
                self.bytes.free += (codes[codes % 2 == 1] >> 1).tolist()
            c[sel] = -1
            self.splits -= int(sel.sum())

    def access(self, blo: int, bhi: int, write: bool, r: int, n: int) -> None:
        """Record event n of rank r over the page's bytes [blo, bhi) (checked already)."""
        if write and (blo, bhi) == (0, PAGE * WORD):
            self.collapse()
        elif self.uniform and (blo, bhi) != (0, PAGE * WORD):
            self.expand()
        if not self.uniform:
            if not self.splits and not blo % WORD and not bhi % WORD:  # whole words, none split: the common case
                self.record(slice(blo // WORD, bhi // WORD), write, r, n)
                return
            a, b, fa, fb = blo // WORD, -(-bhi // WORD), -(-blo // WORD), bhi // WORD
            if write and self.splits and fa < fb:
                self._whole(fa, fb)
            if blo % WORD:
                self._refine(a, blo - a * WORD, min(bhi - a * WORD, WORD))
            if bhi % WORD:
                self._refine(b - 1, max(blo - (b - 1) * WORD, 0), bhi - (b - 1) * WORD)
        for cells, ix in self.parts(blo, bhi):
            cells.record(ix, write, r, n)


class _Shadow:
    """The pages of one symmetric buffer, by page number (a 1 GiB buffer costs nothing until touched)."""

    def __init__(self):
        self.pages: dict[int, _Page] = {}

    def pieces(self, lo: int, hi: int, create: bool = False):
        """(page, first byte, end byte), in the page, covering buffer bytes [lo, hi); pages never touched are
        left out unless `create`."""
        size = PAGE * WORD
        for n in range(lo // size, (hi - 1) // size + 1):
            page = self.pages.get(n)
            if page is None:
                if not create:
                    continue
                page = self.pages[n] = _Page()
            yield page, max(lo, n * size) - n * size, min(hi, (n + 1) * size) - n * size


class RunEvents:
    """The get/put events of one data access, one per run of bytes [lo - origin, hi - origin) of `owner`'s buffer
    (`runs` are addresses, the buffer starts at `origin`), made only when asked for: an interpreted warp load of
    a strided buffer is hundreds of runs, and the detector keeps an event for every one of them."""

    __slots__ = ("base", "call", "kind", "origin", "owner", "rank", "runs", "site", "where")

    def __init__(self, kind: str, rank: int, site: str, where: str, owner: int, runs: list, origin: int, call: int):
        self.kind, self.rank, self.site, self.where, self.owner, self.call = kind, rank, site, where, owner, call
        self.runs, self.origin = runs, origin
        self.base = 0  # the detector's index of the first run's event

    def event(self, k: int) -> Event:
        lo, hi = self.runs[k]
        return Event(self.kind, self.rank, self.site, self.where, self.owner, lo - self.origin, hi - self.origin,
                     call=self.call)


class RaceDetector:
    def __init__(self, clocks):
        self.clocks = clocks
        self.size = clocks.ranks
        # keyed by the allocation itself: an id could be reused by a later allocation once an evicted one is
        # gone, and a shadow goes with its allocation
        self._shadows: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._events: list = [None]  # accesses referenced by the shadows; 0 is NEVER
        # per event index: its clock thread, the epoch of that thread's clock and its rank; NEVER's epoch -1
        # is ordered before every clock (epochs start at 1)
        self._thread = np.zeros(1024, dtype=np.int32)
        self._epoch = np.full(1024, -1, dtype=np.int64)
        self._rank = np.full(1024, -1, dtype=np.int32)

    def _shadow(self, alloc) -> _Shadow:
        sh = self._shadows.get(alloc)
        if sh is None:
            sh = self._shadows[alloc] = _Shadow()
        return sh

    def _add(self, items: list, t: int, epoch: int, r: int) -> int:
        """Append `items` as events of rank r on clock thread t at `epoch`; the first one's index."""
        base = len(self._events)
        self._events.extend(items)
        end = len(self._events)
        if end > 2**31 - 1:
            raise OverflowError("race detector: more than 2**31 events (int32 shadow cells)")
        if end > self._epoch.size:
            grow = max(end, 2 * self._epoch.size) - self._epoch.size
            self._thread = np.concatenate((self._thread, np.zeros(grow, np.int32)))
            self._epoch = np.concatenate((self._epoch, np.full(grow, -1, np.int64)))
            self._rank = np.concatenate((self._rank, np.full(grow, -1, np.int32)))
        self._thread[base:end], self._epoch[base:end], self._rank[base:end] = t, epoch, r
        return base

    def access(self, alloc, ev: Event, write: bool) -> tuple[Event, str] | None:
        """Record ev, made by rank ev.rank's current clock thread; return (the earlier conflicting access,
        what kind of race) if it races."""
        if ev.hi <= ev.lo:
            return None  # no bytes, nothing to race with
        sh = self._shadow(alloc)
        r, t = ev.rank, self.clocks.thread(ev.rank)
        clock = self.clocks.vc[t]
        vc = np.asarray(clock, dtype=np.int64)
        parts = [p for page, lo, hi in sh.pieces(ev.lo, ev.hi) for p in page.parts(lo, hi)]
        hit = self._conflict(parts, vc, r, write)
        if hit is not None:
            return self._event(hit[0]), hit[1]
        n = self._add([ev], t, clock[t], r)
        for page, lo, hi in sh.pieces(ev.lo, ev.hi, create=True):
            page.access(lo, hi, write, r, n)
        return None

    def _event(self, n: int) -> Event:
        e = self._events[n]
        return e if isinstance(e, Event) else e.event(n - e.base)

    def access_runs(self, alloc, runs: RunEvents, write: bool, before=None) -> bool:
        """Record every run of `runs` at once, as `access` would one after another, where none of them races and
        they are whole words on pages with no split word (the common case); False, with nothing recorded,
        otherwise (the caller then takes them one by one). Runs are disjoint, sorted and of one rank, so none
        can race with another and the order they are recorded in changes nothing."""
        span = np.asarray(runs.runs, dtype=np.int64).reshape(-1, 2) - runs.origin
        if (span & (WORD - 1)).any():
            return False
        sh = self._shadow(alloc)
        wlo, lengths = span[:, 0] // WORD, (span[:, 1] - span[:, 0]) // WORD
        run_of = np.repeat(np.arange(len(span)), lengths)
        words = np.arange(run_of.size, dtype=np.int64) + np.repeat(wlo - (np.cumsum(lengths) - lengths), lengths)
        pages = words // PAGE
        cuts = np.flatnonzero(pages[1:] != pages[:-1]) + 1
        segs = []
        r, t = runs.rank, self.clocks.thread(runs.rank)
        clock = self.clocks.vc[t]
        vc = np.asarray(clock, dtype=np.int64)
        for s, e in zip([0, *cuts.tolist()], [*cuts.tolist(), words.size]):
            n = int(pages[s])
            page = sh.pages.get(n)
            if page is not None:
                if page.splits:
                    return False
                ix = slice(0, 1) if page.uniform else words[s:e] - n * PAGE
                if self._conflict([(page, ix)], vc, r, write) is not None:
                    return False
            segs.append((n, page, s, e))
        if before is not None:
            before()  # what the caller does once no run races (it may raise)
        base = runs.base = self._add([runs] * len(span), t, clock[t], r)
        for n, page, s, e in segs:
            if page is None:
                page = sh.pages[n] = _Page()
            first = int(run_of[s])
            if e - s == PAGE and first == int(run_of[e - 1]):  # one run covers the page: as `access` records it
                page.access(0, PAGE * WORD, write, r, base + first)
                continue
            if page.uniform:
                page.expand()
            page.record(words[s:e] - n * PAGE, write, r, base + run_of[s:e])
        return True

    def _late(self, events: np.ndarray, vc: np.ndarray) -> np.ndarray:
        """Which of `events` are not ordered before clock `vc`."""
        return self._epoch[events] > vc[self._thread[events]]

    def _conflict(self, parts: list, vc: np.ndarray, r: int, write: bool) -> tuple[int, str] | None:
        """(event index, kind) of an earlier access in the cells `parts` ((cells, index) pairs) not ordered
        before clock `vc`: writes of other ranks first, then (for a write) other ranks' reads, by rank."""
        for cells, ix in parts:
            writes = cells.write[ix]
            foreign = writes[self._rank[writes] != r]  # clocks only for these: a rank mostly reads its own writes
            if foreign.size:
                late = self._late(foreign, vc)
                if late.any():
                    return int(foreign[np.argmax(late)]), ("write-write" if write else "stale read")
        if write:
            for cells, ix in parts:
                if not cells.ranks:
                    continue
                reads = cells.reads[:, ix]
                late = self._late(reads, vc)
                if r in cells.ranks:
                    late[cells.ranks.index(r)] = False
                if late.any():
                    q, w = np.argwhere(late)[0]
                    return int(reads[q, w]), "write after read"
        return None
