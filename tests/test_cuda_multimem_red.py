"""Inline CUDA on simulated ranks (tests/programs/cuda_multimem_red_barrier.py, one build): a barrier made of
`multimem.red` arrivals (as ThunderKittens' barrier_all) is atomics on one word from every rank, not a
write-write race (it was lowered as plain puts); without the wait, the peer reads are the race they are.
A relaxed wait (ThunderKittens' barrier) orders the peers' data for the stream's next kernel (a kernel's end
acts as a fence), not for reads later in the same kernel (D4).
Builds take minutes: slow tests."""

import pytest
from conftest import check_program

from pkbsim.cuda.toolchain import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


def test_multicast_reduction_arrivals_are_no_race():
    res, _ = check_program("cuda_multimem_red_barrier.py", "barrier")
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_reading_peers_without_waiting_is_a_race():
    res, _ = check_program("cuda_multimem_red_barrier.py", "no_wait")
    assert res.verdict != "ok"
    assert any("race" in f.render().lower() for f in res.findings), [f.render() for f in res.findings]


def test_a_relaxed_wait_orders_the_next_kernels_reads():
    res, _ = check_program("cuda_multimem_red_barrier.py", "relaxed_next_kernel")
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_a_relaxed_wait_orders_nothing_in_its_own_kernel():
    res, _ = check_program("cuda_multimem_red_barrier.py", "relaxed_same_kernel")
    assert res.verdict != "ok"
    assert any("race" in f.render().lower() for f in res.findings), [f.render() for f in res.findings]


def test_a_reusable_counter_barrier_called_back_to_back_is_no_hang():
    # ThunderKittens' barrier_all waits for exactly world and subtracts it: on the GPU a spinning rank reads
    # world long before a fast peer's next arrival lands; pkb's schedule must not let that arrival in first
    res, _ = check_program("cuda_multimem_red_barrier.py", "reusable", nproc=4)
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_a_counter_barrier_never_reset_is_the_hang_it_is():
    res, _ = check_program("cuda_multimem_red_barrier.py", "reusable_no_reset", nproc=4)
    assert res.verdict == "protocol", [f.render() for f in res.findings]
    assert "spinning on rank" in res.findings[0].render()
