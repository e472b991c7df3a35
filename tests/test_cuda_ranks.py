"""Inline-CUDA extensions on simulated ranks, end to end: one extension (tests/programs/
cuda_one_shot_modes.py, built once and cached) whose one-shot all-reduce kernel runs correctly or with
one bug per mode, checked with `pkb check`'s engine. Builds take about a minute: slow tests."""
import io
import os
import pathlib

import pytest
from conftest import HERE

from pkbsim.cuda.toolchain import unavailable
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]
PROGRAM = os.path.join(HERE, "programs", "cuda_one_shot_modes.py")
SOURCE = pathlib.Path(PROGRAM).read_text().splitlines()


def line_of(text: str) -> int:
    return next(i for i, ln in enumerate(SOURCE, 1) if text in ln)


def check(mode: str, nproc: int = 2, iterations: int = 2):
    return check_script(PROGRAM, [mode, str(iterations)], RunOptions(nproc=nproc, timeout=300, output=io.StringIO()))


def test_one_shot_all_reduce_over_peer_pointers_is_correct_and_counts_peer_bytes():
    res = check("ok", nproc=4)
    assert res.verdict == "ok", [f.render() for f in res.findings]
    launches = [r for r in res.traces[0].records if r["kind"] == "compute" and r["op"] == "all_reduce_kernel"]
    assert len(launches) == 2 and launches[0]["kernel"] == "cuda"
    read = launches[0]["peer_bytes"]["read"]
    assert read == {1: 1024 * 4, 2: 1024 * 4, 3: 1024 * 4}  # each peer's whole buffer, once


def test_wrong_expected_flag_value_deadlocks_naming_the_cuda_line_and_slot():
    res = check("wrong_flag")
    assert res.verdict == "protocol"
    f = res.findings[0]
    details = "\n".join(f.details)
    assert "signal pad, channel 0, slot" in details and "all_reduce_kernel[block 0]" in details
    assert any(s.startswith("cuda_one_shot_modes.py:") for s in f.sites)
    assert f"cuda_one_shot_modes.py:{line_of('atom.acq_rel.sys.global.cas.b32')}" in f.sites


def test_missing_entry_barrier_is_a_stale_read_of_the_peer_buffer():
    res = check("no_entry_barrier")
    race = next(f for f in res.findings if f.kind == "race")
    assert "stale read" in race.message and "symmetric buffer" in race.message
    assert f"cuda_one_shot_modes.py:{line_of('acc += bufs[p][i]')}" in race.sites


def test_reading_past_the_pointer_table_is_a_memory_fault_with_the_line():
    res = check("table_overrun")
    assert res.verdict == "error"
    msg = res.findings[0].message
    assert "MemoryFault" in msg and "outside every mapped buffer" in msg
    assert f"cuda_one_shot_modes.py:{line_of('acc += bufs[p][i]')}" in msg


def test_relaxed_flags_without_fences_are_d4_and_fences_fix_them():
    res = check("relaxed_flags")
    race = next(f for f in res.findings if f.kind == "race")
    assert "release" in race.message
    assert check("fenced_relaxed_flags").verdict == "ok"


def test_a_block_scope_fence_does_not_order_flags_for_peers():
    """__threadfence_block() where __threadfence_system() belongs: the relaxed flags stay unordered."""
    res = check("block_fenced_relaxed_flags")
    race = next(f for f in res.findings if f.kind == "race")
    assert "release" in race.message


def test_blocks_waiting_on_each_other_rely_on_co_residency_unless_launched_cooperatively():
    res = check("co_residency")
    assert {f.kind for f in res.findings} == {"co_residency"} and res.verdict == "protocol"
    assert "grid_barrier_kernel[block 0] waited until grid_barrier_kernel[block 1] ran" in res.findings[0].details
    assert check("cooperative").verdict == "ok"


EPOCH = os.path.join(HERE, "programs", "cuda_epoch_flag_blocks.py")


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_block_waiting_once_on_one_flag_set_is_not_a_reused_slot(nproc):
    res = check_script(EPOCH, ["ok"], RunOptions(nproc=nproc, timeout=300, output=io.StringIO()))
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_a_block_passing_on_the_previous_calls_flag_is_a_reused_slot():
    res = check_script(EPOCH, ["reused"], RunOptions(nproc=2, timeout=300, output=io.StringIO()))
    assert res.verdict == "protocol"   # the reused slot, or the stale data it lets a block read first
    f = res.findings[0]
    assert ("stale flag" in f.message and "all_reduce_kernel[block" in f.message) or f.kind == "race", f.message
