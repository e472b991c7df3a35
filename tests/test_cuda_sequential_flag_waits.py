"""Inline CUDA on simulated ranks (tests/programs/cuda_sequential_flag_waits.py, one build): a thread that
waits for each peer's flag in turn, every flag already set, is progress and not a spin (a ParallelKernelBench
GEMM + reduce-scatter was rejected as a deadlock); a flag never set is still a deadlock. Builds take minutes:
slow tests."""

import pytest
from conftest import check_program

from pkbsim.cuda.toolchain import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


def test_waiting_for_flags_in_turn_that_are_all_set_passes():
    res, _ = check_program("cuda_sequential_flag_waits.py", "set")
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_a_flag_never_set_is_a_deadlock_naming_it():
    res, _ = check_program("cuda_sequential_flag_waits.py", "missing")
    assert res.verdict != "ok"
    assert any("blocked" in f.message for f in res.findings), [f.render() for f in res.findings]
    assert any("byte 24" in f.render() for f in res.findings), [f.render() for f in res.findings]


def test_each_wait_on_a_set_flag_is_a_round_trip_on_the_chain():
    """The eight waits that pass at once are eight reads one after another (ready_polls), not spins and not
    flag hops; on an H200 the kernel took 2.98 us, 0.93 (the kernel floor) before they were counted."""
    import io
    import os

    from conftest import HERE

    from pkbsim.world.check import check_script
    from pkbsim.world.launcher import RunOptions
    res = check_script(os.path.join(HERE, "programs", "cuda_sequential_flag_waits.py"), ["set"],
                       RunOptions(nproc=1, timeout=600, record_compute=True, output=io.StringIO()))
    dev = [r["device"] for r in res.traces[0].records if r.get("device")][-1]
    assert (dev["ready_polls"], dev["local_hops"], dev["remote_waits"], dev["sys_fences"]) == (8, 0, 0, 0)
