"""Copies an extension makes through the CUDA runtime (cudaMemcpyAsync into a peer's symmetric buffer) are
device accesses of the simulated rank: race-checked like a kernel's, bounded by the memory the rank has.
Before, the runtime stand-in moved the bytes itself, unseen: a push with no barrier before the peer's read
came out right or wrong by which thread ran first, and a push past the end of a buffer wrote host memory."""
import os

import pytest
from conftest import HERE

from pkbsim.cuda.toolchain import unavailable
from pkbsim.screen.pipeline import ScreenOptions, screen
from pkbsim.timing.topology import load_topology
from tasks.registry import get

CANDIDATE = os.path.join(HERE, "cuda_candidates", "memcpy_push_all_reduce.py")
needs_nvcc = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


def run_screen(monkeypatch, bug: str, seed: int = 3):
    monkeypatch.setenv("PKB_CANDIDATE_BUG", bug)
    return screen(get("all_reduce"), CANDIDATE, ScreenOptions(4, load_topology("hgx-h100"), seed=seed, cost=False))


@pytest.mark.slow
@needs_nvcc
def test_pushed_copies_with_barriers_pass(monkeypatch):
    res = run_screen(monkeypatch, "")
    assert res.verdict == "pass" and res.correct and not res.warnings, res.reasons


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("seed", [3, 4])
def test_a_push_no_barrier_orders_before_the_read_is_a_race_at_its_copy(monkeypatch, seed):
    res = run_screen(monkeypatch, "no_barrier", seed)
    assert res.verdict == "reject", res.reasons
    reason = res.reasons[0]
    assert reason.kind == "race" and "cudaMemcpy" in reason.message, reason
    assert not reason.pkb_only  # within one call: a fault under every rule set


@pytest.mark.slow
@needs_nvcc
def test_a_copy_past_the_end_of_a_buffer_is_a_memory_fault_not_a_host_write(monkeypatch):
    res = run_screen(monkeypatch, "overrun")
    assert res.verdict == "reject" and res.reasons[0].kind == "error", res.reasons
    assert "MemoryFault: cudaMemcpy" in res.reasons[0].message and "beyond the end of" in res.reasons[0].message
