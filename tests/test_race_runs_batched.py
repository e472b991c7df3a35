"""The race detector records the byte runs of one strided access together (RaceDetector.access_runs, used by
protocol.emit_data) as it records them one at a time: the same shadow state, the same events and, where a run
races, the same finding (that access falls back to one run at a time). Random multi-run accesses of several
ranks with random clocks check it, on pages never touched, uniform, expanded and with split words."""
import random

import pytest
import torch

from pkbsim.device import races
from pkbsim.device.ir import Event
from pkbsim.device.races import RaceDetector, RunEvents
from pkbsim.symm.handle import Allocation
from pkbsim.world.clocks import VectorClocks

PAGE_BYTES = races.PAGE * races.WORD


def _runs(rng: random.Random, nbytes: int, odd: float) -> list[tuple[int, int]]:
    """Disjoint sorted runs, gaps of at least a byte: whole words, some whole pages, a share `odd` of odd bytes."""
    runs, at = [], rng.randrange(0, 64) * (4 if rng.random() >= odd else 1)
    for _ in range(rng.randint(1, 12)):
        unit = 4 if rng.random() >= odd else rng.choice((1, 2))
        length = PAGE_BYTES if rng.random() < 0.05 else unit * rng.randint(1, 600)
        if at + length > nbytes:
            break
        runs.append((at, at + length))
        at += length + unit * rng.randint(1, 40)
    return runs or [(0, 4)]


def _state(det: RaceDetector, buf) -> list:
    out = []
    sh = det._shadows.get(buf)
    for n, page in sorted(sh.pages.items()):
        cells = [page.uniform, page.splits, page.write.tolist(), list(page.ranks), page.reads.tolist()]
        events = [[det._event(int(e)) if e else None for e in page.write],
                  [det._event(int(e)) if e else None for e in page.reads.reshape(-1)]]
        out.append((n, cells, events))
    return out


def _replay(seed: int, batched: bool):
    rng = random.Random(seed)
    odd = 0.0 if seed % 2 else 0.1
    ranks, nbytes = 4, 3 * PAGE_BYTES
    clocks = VectorClocks(ranks)
    det = RaceDetector(clocks)
    buf = Allocation(0, torch.zeros(nbytes // 4), torch.zeros(16, dtype=torch.int32))
    found = []
    for i in range(60):
        r = rng.randrange(ranks)
        write = rng.random() < 0.5
        if rng.random() < 0.6:   # a barrier: every rank acquires what every rank released
            done = [clocks.release(q) for q in range(ranks)]
            for q in range(ranks):
                for c in done:
                    clocks.acquire(q, c)
        elif rng.random() < 0.5:   # one rank acquires what another released
            clocks.acquire(r, clocks.release(rng.randrange(ranks)))
        runs = _runs(rng, nbytes, odd)
        group = RunEvents("put" if write else "get", r, f"p.py:{i}", "k", 0, [(lo + 1000, hi + 1000) for lo, hi in runs],
                          1000, 0)
        if batched and det.access_runs(buf, group, write):
            continue
        for k in range(len(runs)):
            hit = det.access(buf, group.event(k), write)
            if hit is not None:
                found.append((i, k, hit))
                break
    return found, _state(det, buf)


@pytest.mark.parametrize("seed", range(12))
def test_runs_recorded_together_match_runs_recorded_one_by_one(seed):
    one_by_one, together = _replay(seed, False), _replay(seed, True)
    assert together[0] == one_by_one[0]
    assert together[1] == one_by_one[1]


def test_runs_recorded_together_take_the_batched_path_on_whole_words():
    clocks = VectorClocks(2)
    det = RaceDetector(clocks)
    buf = Allocation(0, torch.zeros(3 * PAGE_BYTES // 4), torch.zeros(16, dtype=torch.int32))
    runs = [(lo, lo + 384) for lo in range(0, 2 * PAGE_BYTES, 512)]
    assert det.access_runs(buf, RunEvents("get", 0, "p.py:1", "k", 0, runs, 0, 0), False)
    # the reads were recorded: a peer's unordered write under one of them races
    assert det.access(buf, Event("put", 1, "p.py:2", "k", 0, 1024, 1028), True)[1] == "write after read"
