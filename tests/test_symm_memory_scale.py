"""pkb's memory follows what a program touches, not the size of its symmetric buffers: 8 ranks with 1 GiB
each and a small kernel run under a 12 GiB address-space limit (the screening worker's RLIMIT_AS)."""
import gc
import json
import os
import resource
import subprocess
import sys

import pytest
import torch

from pkbsim.device.ir import Event
from pkbsim.device.races import PAGE, WORD, RaceDetector
from pkbsim.symm.handle import Allocation
from pkbsim.world.clocks import VectorClocks

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "programs", "symm_large_buffers.py")


def test_race_shadow_pages_are_made_on_first_touch_and_races_cross_pages():
    clocks = VectorClocks(2)
    for r in range(2):
        clocks.vc[r][r] = 1
    det = RaceDetector(clocks)
    big = Allocation(0, torch.empty(2**28), torch.zeros(16, dtype=torch.int32))   # 1 GiB, never filled
    edge = 3 * PAGE * WORD - 8   # 16 bytes across the end of page 2
    assert det.access(big, Event("put", 1, "p.py:1", "k", 0, edge, edge + 16), write=True) is None
    assert sorted(det._shadows[big].pages) == [2, 3]
    earlier, what = det.access(big, Event("get", 0, "p.py:2", "k", 0, edge + 8, edge + 12), write=False)
    assert what == "stale read" and earlier.rank == 1


def test_a_write_over_a_whole_buffer_keeps_one_cell_per_page_until_part_of_a_page_is_touched():
    clocks = VectorClocks(2)
    for r in range(2):
        clocks.vc[r][r] = 1
    det = RaceDetector(clocks)
    big = Allocation(0, torch.empty(2**28), torch.zeros(16, dtype=torch.int32))   # 1 GiB
    assert det.access(big, Event("put", 0, "p.py:1", "host", 0, 0, 2**30), write=True) is None   # a host fill
    pages = det._shadows[big].pages
    assert len(pages) == 2**30 // (PAGE * WORD) and all(p.uniform for p in pages.values())
    earlier, what = det.access(big, Event("get", 1, "p.py:2", "k", 0, PAGE * WORD + 16, PAGE * WORD + 20), write=False)
    assert what == "stale read" and earlier.site == "p.py:1"
    clocks.acquire(1, clocks.release(0))
    assert det.access(big, Event("get", 1, "p.py:3", "k", 0, PAGE * WORD + 16, PAGE * WORD + 20), write=False) is None
    assert [n for n, p in pages.items() if not p.uniform] == [1]


def _limit_address_space():
    cap = 12 * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS")
def test_eight_ranks_with_1_gib_symmetric_buffers_fit_in_12_gib():
    pytest.importorskip("triton")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run([sys.executable, "-m", "pkb.cli.main", "check", "--json", "--nproc-per-node", "8",
                           "--timeout", "300", PROGRAM, "1024"], capture_output=True, text=True,
                          preexec_fn=_limit_address_space, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)["verdict"] == "ok"
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak_kib > before:   # the largest child so far is this one
        assert peak_kib < 2 * 2**20, f"peak RSS {peak_kib / 2**20:.1f} GiB for 8 GiB of mostly untouched buffers"


def test_a_race_shadow_goes_with_its_allocation_and_a_live_one_keeps_its_history():
    """Shadows are keyed by the allocation, not its id: a later allocation can never inherit an evicted one's
    accesses (a false race), and an allocation still held keeps them (the race is still found)."""
    clocks = VectorClocks(2)
    for r in range(2):
        clocks.vc[r][r] = 1
    det = RaceDetector(clocks)
    gone, kept = (Allocation(0, torch.empty(16), torch.zeros(16, dtype=torch.int32)) for _ in range(2))
    for a in (gone, kept):
        assert det.access(a, Event("put", 1, "p.py:1", "k", 0, 0, 8), write=True) is None
    del gone
    gc.collect()
    assert len(det._shadows) == 1   # the id-keyed table kept 2
    assert det.access(kept, Event("get", 0, "p.py:2", "k", 0, 0, 4), write=False)[1] == "stale read"
