"""The race shadow's cells hold event indices only (the detector keeps each event's clock thread, epoch and rank
once), and only ranks that read a page have a row of reads: a representation change, so the detector must find
exactly what the detector of 8eccb81 (one cell of every field per word, tests/race_reference_8eccb81.py) found.
Random access sequences of several ranks on several clock threads (streams, kernel blocks), with barriers and
one-sided acquires, accesses one at a time and as strided runs, on small pages (so that accesses cross pages,
whole-page writes collapse them and words split), are checked against it step by step."""
import random

import pytest
import race_reference_8eccb81 as old
import torch

from pkbsim.device import races as new
from pkbsim.device.ir import Event
from pkbsim.symm.handle import Allocation
from pkbsim.world.clocks import VectorClocks


def _describe(hit):
    return None if hit is None else (hit[0].describe(), hit[0].call, hit[1])


def _runs(rng: random.Random, nbytes: int) -> list[tuple[int, int]]:
    runs, at, unit = [], rng.randrange(0, 16), rng.choice((1, 2, 4, 4, 4))
    at -= at % unit
    for _ in range(rng.randint(1, 10)):
        length = unit * rng.randint(1, 24)
        if at + length > nbytes:
            break
        runs.append((at, at + length))
        at += length + unit * rng.randint(1, 8)
    return runs or [(0, 4)]


def _replay(rng: random.Random, ranks: int, nbytes: int, steps: int):
    clocks = VectorClocks(ranks)
    dets = old.RaceDetector(clocks), new.RaceDetector(clocks)
    bufs = [Allocation(q, torch.zeros(nbytes // 4), torch.zeros(16, dtype=torch.int32)) for q in range(2)]
    threads = {r: [t for t, o in enumerate(clocks.owner) if o == r][:4] for r in range(ranks)}
    found = 0
    for i in range(steps):
        r = rng.randrange(ranks)
        u = rng.random()
        if u < 0.08:   # a barrier: every rank acquires what every rank released
            done = [clocks.release(q) for q in range(ranks)]
            for q in range(ranks):
                for c in done:
                    clocks.acquire(q, c)
            continue
        if u < 0.2:   # one rank acquires what another released
            clocks.acquire(r, clocks.release(rng.randrange(ranks)))
            continue
        if u < 0.3:   # the rank moves to another stream or block
            clocks.current[r] = rng.choice(threads[r])
            clocks.tick(r)
            continue
        buf, write = rng.choice(bufs), rng.random() < 0.5
        kind = "put" if write else "get"
        if rng.random() < 0.3:   # a strided warp access: runs together where the detector can
            base = 4096
            runs = [(lo + base, hi + base) for lo, hi in _runs(rng, nbytes)]
            hits = []
            for det in dets:
                group = new.RunEvents(kind, r, f"p.py:{i}", "k", buf.rank, runs, base, i)
                if det.access_runs(buf, group, write):
                    hits.append(("together", None))
                    continue
                for k in range(len(runs)):
                    hit = det.access(buf, group.event(k), write)
                    if hit is not None:
                        hits.append((k, _describe(hit)))
                        break
                else:
                    hits.append(("one by one", None))
            assert hits[0] == hits[1], (i, runs)
            found += hits[0][1] is not None
            continue
        width = rng.choice([1, 2, 2, 4, 4, 8, 12, 16, 40, nbytes])
        lo = rng.randrange(0, nbytes - width + 1)
        if width < 4 and rng.random() < 0.6:
            lo -= lo % width
        elif rng.random() < 0.6:
            lo -= lo % 4
        ev = Event(kind, r, f"p.py:{i}", "k", buf.rank, lo, lo + width, call=i)
        a, b = (_describe(det.access(buf, ev, write)) for det in dets)
        assert a == b, (i, ev.describe())
        found += a is not None
    return found


@pytest.mark.parametrize("seed", range(16))
def test_compact_shadow_finds_what_the_per_field_shadow_found(monkeypatch, seed):
    for mod in (old, new):
        monkeypatch.setattr(mod, "PAGE", 8)
    rng = random.Random(seed)
    ranks = 2 + seed % 3
    found = _replay(rng, ranks, 8 * 4 * 5, 500)
    assert found > 0   # the sequences do race: the comparison covers reported races, not only silence


@pytest.mark.parametrize("seed", range(4))
def test_compact_shadow_matches_on_full_size_pages(seed):
    rng = random.Random(100 + seed)
    assert _replay(rng, 4, 2 * new.PAGE * new.WORD + 64, 300) >= 0


def test_a_page_read_by_one_rank_has_one_row_of_reads():
    clocks = VectorClocks(8)
    det = new.RaceDetector(clocks)
    buf = Allocation(0, torch.zeros(new.PAGE), torch.zeros(16, dtype=torch.int32))
    assert det.access(buf, Event("put", 0, "p.py:1", "k", 0, 0, new.PAGE * new.WORD), True) is None
    assert det.access(buf, Event("get", 0, "p.py:2", "k", 0, 0, 64), False) is None
    page = det._shadows[buf].pages[0]
    assert page.ranks == [0] and page.reads.shape == (1, new.PAGE)
    assert page.write.nbytes + page.reads.nbytes == 8 * new.PAGE   # 8 bytes a word; 162 in the reference
