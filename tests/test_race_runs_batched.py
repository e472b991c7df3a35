"""A strided access is many runs of bytes (Access.data_events); the race detector checks and records them with one
look at each page's cells (RaceDetector.access_runs) where they are whole words of expanded pages. It must answer
as checking them one at a time does: the same race (run, earlier access, kind) or none, and the same shadow after.
Random sequences of 3 ranks' strided accesses, with random synchronisation between them, up to the first race
(which ends a run), on both; and the
batched path must be the one taken (a detector that never batches passes the comparison but is the slow one)."""
import random

import numpy as np
import torch

from pkbsim.device.accesses import byte_runs
from pkbsim.device.ir import Event
from pkbsim.device.races import PAGE, WORD, RaceDetector
from pkbsim.symm.handle import Allocation
from pkbsim.world.clocks import VectorClocks

RANKS, NBYTES = 3, 3 * PAGE * WORD   # three pages


def _access(rng, rank, step):
    """One warp-like access: 32 lanes at a stride, words or halves, often spanning two pages."""
    width = rng.choice([4, 4, 4, 8, 2])
    stride = rng.choice([1, 2, 3, 8, 64]) * width
    start = rng.randrange(0, NBYTES - 32 * stride - width) // width * width
    if rng.random() < 0.3:  # near a page boundary
        start = max(0, PAGE * WORD * rng.randint(1, 2) - rng.randrange(1, 16) * stride) // width * width
    starts = np.arange(32) * stride + start
    kind = "put" if rng.random() < 0.4 else "get"
    return [Event(kind, rank, f"k.py:{step}", f"kernel[block {rank}]", 0, lo, hi, call=step)
            for lo, hi in byte_runs(starts, width)]


def _replay(seed, batched, steps=60):
    rng = random.Random(seed)
    clocks = VectorClocks(RANKS)
    det = RaceDetector(clocks)
    buf = Allocation(0, torch.zeros(NBYTES // 4), torch.zeros(16, dtype=torch.int32))
    outcomes = []
    for step in range(steps):
        if rng.random() < 0.35:  # a barrier: every rank ordered after all earlier accesses
            clocks.join([clocks.thread(r) for r in range(RANKS)])
        rank = rng.randrange(RANKS)
        evs = _access(rng, rank, step)
        write = evs[0].kind == "put"
        if batched:
            hit = det.access_runs(buf, evs, write)
        else:
            hit = next(((ev, *h) for ev in evs if (h := det.access(buf, ev, write))), None)
        outcomes.append(None if hit is None else (hit[0], hit[1], hit[2]))
        clocks.tick(rank)
        if hit is not None:
            break  # a race ends the run (protocol._race raises SimAbort): what the access recorded is moot
    shadow = {n: (p.uniform, p.splits, p.writer.copy(), p.write_event.copy(), p.read_epoch.copy(), p.read_event.copy())
              for n, p in det._shadow(buf).pages.items()}
    return outcomes, shadow


def test_batched_runs_find_the_same_races_and_leave_the_same_shadow():
    races = 0
    for seed in range(40):
        one, _ = _replay(seed, batched=False)
        many, _ = _replay(seed, batched=True)
        assert many == one, seed
        races += one[-1] is not None
        # the shadows before the access that raced (that access recorded some runs one at a time, none batched)
        _, shadow_one = _replay(seed, False, len(one) - (one[-1] is not None))
        _, shadow_many = _replay(seed, True, len(one) - (one[-1] is not None))
        assert shadow_one.keys() == shadow_many.keys(), seed
        for n, a in shadow_one.items():
            b = shadow_many[n]
            assert a[:2] == b[:2] and all(np.array_equal(x, y) for x, y in zip(a[2:], b[2:])), (seed, n)
    assert races > 10  # the sequences do race: the comparison covers the reports, not only silence


def test_whole_word_runs_of_expanded_pages_take_the_batched_path(monkeypatch):
    clocks = VectorClocks(2)
    det = RaceDetector(clocks)
    buf = Allocation(0, torch.zeros(NBYTES // 4), torch.zeros(16, dtype=torch.int32))
    det.access(buf, Event("put", 0, "k.py:1", "k", 0, 0, 8), write=True)  # expands page 0
    runs = [Event("get", 1, "k.py:2", "k", 0, lo, lo + 4) for lo in range(0, 256, 16)]
    calls = []
    monkeypatch.setattr(RaceDetector, "access", lambda self, *a: calls.append(a))
    assert det.access_runs(buf, runs, write=False) is not None  # rank 0's unordered write at bytes [0, 4)
    assert calls == []
    monkeypatch.undo()
    halves = [Event("get", 1, "k.py:3", "k", 0, lo, lo + 2) for lo in range(512, 768, 16)]  # not whole words
    monkeypatch.setattr(RaceDetector, "access", lambda self, *a: calls.append(a))
    det.access_runs(buf, halves, write=False)
    assert len(calls) == len(halves) and WORD == 4


def test_within_a_run_a_write_conflict_is_named_before_a_read_one():
    # rank 0 wrote bytes [8, 12), rank 1 read [0, 4), neither ordered before rank 2's write of the run [0, 16)
    for batched in (False, True):
        clocks = VectorClocks(3)
        det = RaceDetector(clocks)
        buf = Allocation(0, torch.zeros(NBYTES // 4), torch.zeros(16, dtype=torch.int32))
        assert det.access(buf, Event("put", 0, "k.py:1", "k", 0, 8, 12), write=True) is None
        assert det.access(buf, Event("get", 1, "k.py:2", "k", 0, 0, 4), write=False) is None
        runs = [Event("put", 2, "k.py:3", "k", 0, 0, 16), Event("put", 2, "k.py:3", "k", 0, 64, 68)]
        hit = det.access_runs(buf, runs, True) if batched else det.access(buf, runs[0], True)
        assert hit[-1] == "write-write" and hit[-2].rank == 0, (batched, hit)
