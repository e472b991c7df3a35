"""pkbsim/device/races.py as of 8eccb81, frozen: the oracle of tests/test_race_shadow_compact.py (each cell held
every field; the detector of now holds event indices). Not used by pkb.

Happens-before race detection on symmetric buffers, with vector clocks (FastTrack-style epochs).

Each buffer word keeps its last writer (clock thread, epoch, access) and each rank's last read (thread,
epoch), in pages made on first touch, one cell per page while its words share one state (memory in
proportion to the accesses, not to the buffer). A word that an access covers only in part is split into
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

import weakref

import numpy as np

from pkbsim.device.ir import Event

# bytes per shadow cell. Accesses of whole words (nearly all) cost one cell a word; a word that an access
# covers only in part (adjacent bf16 or int8 elements of different ranks) is split, by a side table of its
# page, into halves or bytes, so that disjoint bytes never race. Cells of 2 bytes throughout would be exact
# too but double the shadow state (about 160 bytes a cell with 8 ranks' reads): too much for buffers of
# 100 MB (gemini-3-pro CUDA 79 went past the sandbox's 17.7 GiB)
WORD = 4
PAGE = 4096  # shadow cells per page: pages are made on first touch, so memory follows what is touched


_FIELDS = ("writer", "write_epoch", "write_event", "read_epoch", "read_thread", "read_event")


class _Cells:
    """Shadow cells, one column each: the last write (clock thread, epoch, event) and each rank's last read
    (epoch + 1, 0 = never; thread; event)."""

    def __init__(self, world_size: int, n: int):
        self.world_size = world_size
        self.writer = np.full(n, -1, dtype=np.int16)
        self.write_epoch = np.zeros(n, dtype=np.int64)
        self.write_event = np.zeros(n, dtype=np.int64)
        self.read_epoch = np.zeros((world_size, n), dtype=np.int64)
        self.read_thread = np.zeros((world_size, n), dtype=np.int16)
        self.read_event = np.zeros((world_size, n), dtype=np.int64)

    def copy(self, dst, src: _Cells, at) -> None:
        """Cells `dst` take the state of cells `at` of `src`."""
        for name in _FIELDS:
            getattr(self, name)[..., dst] = getattr(src, name)[..., at]

    def record(self, ix, write: bool, t: int, epoch: int, r: int, n: int) -> None:
        """Access event n by rank r on clock thread t at `epoch` over cells `ix` (a slice or indices)."""
        if write:
            self.writer[ix], self.write_epoch[ix], self.write_event[ix] = t, epoch, n
            self.read_epoch[:, ix] = 0
        else:
            self.read_epoch[r, ix], self.read_thread[r, ix], self.read_event[r, ix] = epoch + 1, t, n


class _Store(_Cells):
    """The extra cells of a page's split words, `per` a word (1: its second half; 3: its bytes 1 to 3; the
    first unit stays in the word's own cell). Grows by doubling; slots of words made whole again are reused."""

    def __init__(self, world_size: int, per: int):
        super().__init__(world_size, 0)
        self.per, self.used, self.free = per, 0, []

    def alloc(self) -> int:
        if self.free:
            return self.free.pop()
        if self.used * self.per == self.writer.shape[-1]:
            more = max(8, self.used) * self.per
            for name in _FIELDS:
                a = getattr(self, name)
                setattr(self, name, np.concatenate((a, np.zeros(a.shape[:-1] + (more,), a.dtype)), axis=-1))
        self.used += 1
        return self.used - 1


class _Page(_Cells):
    """The shadow of PAGE words: a cell per word (its last write and each rank's last read). While all its
    words share one state (untouched, or wholly covered by its last write, e.g. a host fill of the whole
    buffer) the page keeps a single cell for them; a partial access expands it. A word that an access covers
    only in part is split into halves (2-byte aligned accesses) or bytes: `split[w]` is -1 for a whole word,
    2*slot for halves (slot in `halves`), 2*slot + 1 for bytes (in `bytes`); a write of the whole word makes
    it whole again. Each unit's state holds for all its bytes, so checks are exact at byte granularity."""

    def __init__(self, world_size: int):
        self.world_size = world_size
        self.collapse()

    def collapse(self) -> None:
        """Back to one never-touched cell (before a write that covers the whole page)."""
        super().__init__(self.world_size, 1)
        self.uniform = True
        self.split: np.ndarray | None = None  # made on the first split
        self.splits = 0
        self.halves: _Store | None = None
        self.bytes: _Store | None = None

    def expand(self) -> None:
        """A cell per word (before an access to part of a uniform page). A field whose one cell is all zeros (no
        rank has read the page since its last whole write, the common case) is made by np.zeros, whose memory the
        system maps on first touch: an 8-rank page's read fields are 590 KB, of which an access of one rank's
        touches an eighth (a 1024 x 1024 bf16 buffer per rank expands 1024 pages)."""
        for name in _FIELDS:
            one = getattr(self, name)
            shape = one.shape[:-1] + (PAGE,)
            setattr(self, name, np.repeat(one, PAGE, axis=-1) if one.any() else np.zeros(shape, one.dtype))
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
            self.halves = self.halves or _Store(self.world_size, 1)
            s = self.halves.alloc()
            self.halves.copy(s, self, w)
            self.split[w], self.splits = 2 * s, self.splits + 1
            return
        self.bytes = self.bytes or _Store(self.world_size, 3)
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

    def access(self, blo: int, bhi: int, write: bool, t: int, epoch: int, r: int, n: int) -> None:
        """Record event n over the page's bytes [blo, bhi) (checked already)."""
        if write and (blo, bhi) == (0, PAGE * WORD):
            self.collapse()
        elif self.uniform and (blo, bhi) != (0, PAGE * WORD):
            self.expand()
        if not self.uniform:
            if not self.splits and not blo % WORD and not bhi % WORD:  # whole words, none split: the common case
                self.record(slice(blo // WORD, bhi // WORD), write, t, epoch, r, n)
                return
            a, b, fa, fb = blo // WORD, -(-bhi // WORD), -(-blo // WORD), bhi // WORD
            if write and self.splits and fa < fb:
                self._whole(fa, fb)
            if blo % WORD:
                self._refine(a, blo - a * WORD, min(bhi - a * WORD, WORD))
            if bhi % WORD:
                self._refine(b - 1, max(blo - (b - 1) * WORD, 0), bhi - (b - 1) * WORD)
        for cells, ix in self.parts(blo, bhi):
            cells.record(ix, write, t, epoch, r, n)


class _Shadow:
    """The pages of one symmetric buffer, by page number (a 1 GiB buffer costs nothing until touched)."""

    def __init__(self, world_size: int):
        self.world_size = world_size
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
                page = self.pages[n] = _Page(self.world_size)
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
        self._rank_of = np.array([clocks.rank_of(t) for t in range(len(clocks.vc))], dtype=np.int64)
        # keyed by the allocation itself: an id could be reused by a later allocation once an evicted one is
        # gone, and a shadow goes with its allocation
        self._shadows: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._events: list[Event] = []  # accesses referenced by the shadows

    def _shadow(self, alloc) -> _Shadow:
        sh = self._shadows.get(alloc)
        if sh is None:
            sh = self._shadows[alloc] = _Shadow(self.size)
        return sh

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
        self._events.append(ev)
        n = len(self._events) - 1
        for page, lo, hi in sh.pieces(ev.lo, ev.hi, create=True):
            page.access(lo, hi, write, t, clock[t], r, n)
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
        base = runs.base = len(self._events)
        self._events.extend([runs] * len(span))
        for n, page, s, e in segs:
            if page is None:
                page = sh.pages[n] = _Page(self.size)
            first = int(run_of[s])
            if e - s == PAGE and first == int(run_of[e - 1]):  # one run covers the page: as `access` records it
                page.access(0, PAGE * WORD, write, t, clock[t], r, base + first)
                continue
            if page.uniform:
                page.expand()
            page.record(words[s:e] - n * PAGE, write, t, clock[t], r, base + run_of[s:e])
        return True

    def _conflict(self, parts: list, vc: np.ndarray, r: int, write: bool) -> tuple[int, str] | None:
        """(event index, kind) of an earlier access in the cells `parts` ((cells, index) pairs) not ordered
        before clock `vc`: writes first, then (for a write) reads."""
        for cells, ix in parts:
            writers = cells.writer[ix]
            foreign = (writers >= 0) & (self._rank_of[writers] != r)
            if foreign.any():
                idx = np.nonzero(foreign)[0]
                unordered = vc[writers[idx]] < cells.write_epoch[ix][idx]
                if unordered.any():
                    first = idx[np.argmax(unordered)]
                    return int(cells.write_event[ix][first]), ("write-write" if write else "stale read")
        if write:
            for cells, ix in parts:
                late = cells.read_epoch[:, ix] > vc[cells.read_thread[:, ix]] + 1
                late[r] = False
                if late.any():
                    q, w = np.argwhere(late)[0]
                    return int(cells.read_event[:, ix][q, w]), "write after read"
        return None
