"""The race detector is exact at byte granularity: ranks that store adjacent bf16 or int8 elements sharing a
4-byte word touch disjoint bytes and do not race (a ParallelKernelBench sample sort, gemini-3-pro CUDA problem
86, was rejected as a write-write race); the same element, or a sub-word write under a wider read, still does.
A brute-force per-byte model checks the detector on random access sequences."""
import random

import pytest
import torch

from pkbsim.device import races
from pkbsim.device.ir import Event
from pkbsim.device.races import RaceDetector
from pkbsim.symm.handle import Allocation
from pkbsim.world.clocks import VectorClocks
from test_strided_access_races import TRITON as STRIDED_TRITON


def _setup(n=2, nbytes=256):
    clocks = VectorClocks(n)
    buf = Allocation(0, torch.zeros(nbytes // 4), torch.zeros(16, dtype=torch.int32))
    return clocks, RaceDetector(clocks), buf


def _put(det, buf, rank, lo, hi):
    return det.access(buf, Event("put", rank, f"p.py:{rank}", "k", 0, lo, hi), write=True)


def _get(det, buf, rank, lo, hi):
    return det.access(buf, Event("get", rank, f"p.py:{rank}", "k", 0, lo, hi), write=False)


def test_adjacent_bf16_stores_of_two_ranks_do_not_race():
    _, det, buf = _setup()
    assert _put(det, buf, 0, 0, 2) is None
    assert _put(det, buf, 1, 2, 4) is None
    assert _get(det, buf, 0, 0, 2) is None   # its own element
    earlier, what = _get(det, buf, 0, 2, 4)   # the peer's element, unordered: both writers are kept
    assert what == "stale read" and earlier.rank == 1


def test_two_ranks_storing_the_same_bf16_element_race():
    _, det, buf = _setup()
    assert _put(det, buf, 0, 2, 4) is None
    earlier, what = _put(det, buf, 1, 2, 4)
    assert what == "write-write" and earlier.rank == 0


def test_adjacent_int8_stores_do_not_race_and_the_same_byte_does():
    _, det, buf = _setup(8)
    for r in range(8):   # ranks 0..7 store bytes 0..7 (two words)
        assert _put(det, buf, r, r, r + 1) is None
    earlier, what = _put(det, buf, 0, 5, 6)
    assert what == "write-write" and earlier.rank == 5


def test_a_bf16_store_under_an_unordered_word_read_races_both_ways():
    _, det, buf = _setup()
    assert _put(det, buf, 1, 2, 4) is None
    assert _get(det, buf, 0, 0, 4)[1] == "stale read"
    _, det, buf = _setup()
    assert _get(det, buf, 0, 0, 4) is None
    assert _put(det, buf, 1, 2, 4)[1] == "write after read"
    assert _put(det, buf, 1, 0, 2)[1] == "write after read"


def test_a_peer_read_of_one_half_does_not_stop_a_write_of_the_other():
    _, det, buf = _setup()
    assert _get(det, buf, 1, 0, 2) is None
    assert _put(det, buf, 0, 2, 4) is None
    assert _put(det, buf, 0, 1, 2)[1] == "write after read"


def test_a_synchronised_word_write_over_split_words_makes_them_whole_again():
    clocks, det, buf = _setup()
    assert _put(det, buf, 0, 2, 6) is None   # halves of words 0 and 1
    assert _put(det, buf, 1, 0, 2) is None
    clocks.acquire(1, clocks.release(0))
    assert _put(det, buf, 1, 0, 8) is None
    page = det._shadows[buf].pages[0]
    assert page.splits == 0
    assert _get(det, buf, 0, 3, 4)[1] == "stale read"


def test_an_empty_access_touches_nothing():
    _, det, buf = _setup()
    assert _put(det, buf, 1, 6, 6) is None
    assert _put(det, buf, 0, 4, 8) is None


class _Bytes:
    """The reference: the same happens-before rule, one shadow cell per byte, in dicts."""

    def __init__(self, clocks):
        self.clocks, self.write, self.reads = clocks, {}, {}

    def access(self, ev, write):
        t = self.clocks.thread(ev.rank)
        vc = self.clocks.vc[t]
        span = range(ev.lo, ev.hi)
        for b in span:
            w = self.write.get(b)
            if w and self.clocks.rank_of(w[0]) != ev.rank and vc[w[0]] < w[1]:
                return "write-write" if write else "stale read"
        if write:
            for b in span:
                for q, (rt, re) in self.reads.get(b, {}).items():
                    if q != ev.rank and vc[rt] < re:
                        return "write after read"
        for b in span:
            if write:
                self.write[b], self.reads[b] = (t, vc[t]), {}
            else:
                self.reads.setdefault(b, {})[ev.rank] = (t, vc[t])
        return None


@pytest.mark.parametrize("seed", range(12))
def test_random_accesses_agree_with_a_per_byte_model(monkeypatch, seed):
    """Small pages (8 words) so that accesses cross pages and whole-page writes collapse them."""
    monkeypatch.setattr(races, "PAGE", 8)
    rng = random.Random(seed)
    n, size = 3, 96
    clocks, det, buf = _setup(n, size)
    ref = _Bytes(clocks)
    for _ in range(400):
        r = rng.randrange(n)
        if rng.random() < 0.15:
            q = rng.randrange(n)
            clocks.acquire(q, clocks.release(r))
            continue
        width = rng.choice([1, 2, 2, 4, 4, 8, 16, 40, 96])
        lo = rng.randrange(0, size - width + 1)
        if width < 4 and rng.random() < 0.5:
            lo -= lo % width   # aligned elements, mostly
        write = rng.random() < 0.5
        ev = Event("put" if write else "get", r, "p.py", "k", 0, lo, lo + width)
        want = ref.access(ev, write)
        got = det.access(buf, ev, write)
        assert (got and got[1]) == want, (seed, ev.describe())
        if got:
            assert got[0].rank != r


HOST = """
import torch.distributed._symmetric_memory as symm_mem
rows = 4
buf = symm_mem.empty((rows, world), dtype=DTYPE, device="cuda")
hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
hdl.barrier(channel=0)
for peer in range(world):
    dst = hdl.get_buffer(peer, (rows, world), DTYPE)
    dst[:, COL].copy_(torch.full((rows,), rank, dtype=DTYPE, device="cuda"))
hdl.barrier(channel=0)
"""


@pytest.mark.parametrize("dtype", ["torch.bfloat16", "torch.int8"])
def test_host_copies_into_each_ranks_own_narrow_column_do_not_race(run_program, dtype):
    res = run_program(HOST.replace("DTYPE", dtype).replace("COL", "rank"))
    assert res.verdict == "ok", [f.message for f in res.findings]


@pytest.mark.parametrize("dtype", ["torch.bfloat16", "torch.int8"])
def test_host_copies_into_the_same_narrow_column_race(run_program, dtype):
    res = run_program(HOST.replace("DTYPE", dtype).replace("COL", "0"))
    assert any(f.kind == "race" and "write-write" in f.message for f in res.findings), res.output


# the strided test's interleaved Triton stores, at 2 bytes an element: two ranks share each 4-byte word
TRITON = STRIDED_TRITON.replace("float32", "bfloat16")


def test_triton_bf16_stores_to_each_ranks_own_interleaved_slots_do_not_race(run_program):
    pytest.importorskip("triton")
    res = run_program(TRITON.replace("SLOT", "rank"))
    assert res.verdict == "ok", [f.message for f in res.findings]


def test_triton_bf16_stores_to_the_same_interleaved_slots_race(run_program):
    pytest.importorskip("triton")
    res = run_program(TRITON.replace("SLOT", "0"))
    assert any(f.kind == "race" and "write-write" in f.message for f in res.findings), res.output


@pytest.mark.parametrize("read_first", [False, True])
def test_expanding_a_uniform_page_gives_every_word_its_one_cell(read_first):
    """A uniform page expanded before a partial access keeps, in each word's cell, the state its one cell had;
    only a rank that read the page has a row of reads."""
    page = races._Page()
    page.access(0, races.PAGE * races.WORD, True, 1, 11)        # a whole write: one cell
    if read_first:
        page.access(0, races.PAGE * races.WORD, False, 2, 12)   # a whole read by rank 2: still uniform
    assert page.uniform
    write, ranks, reads = page.write.copy(), list(page.ranks), page.reads.copy()
    page.expand()
    assert page.write.shape == (races.PAGE,) and (page.write == write).all()
    assert page.ranks == ranks == ([2] if read_first else [])
    assert page.reads.shape == (len(ranks), races.PAGE) and (page.reads == reads).all()
