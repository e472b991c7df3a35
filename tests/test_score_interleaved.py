"""The two jobs of a launch take turns batch by batch (hwbackend/score.py `_interleaved`): while one job's batch
is timed the other is stopped from outside, and the noise margin is the spread of the launches' own speed-ups,
which a drift of the machine does not move."""
import os
import subprocess
import sys
import tempfile
import time

import pytest

import candidate_sandbox as sandbox
from hwbackend.job_spec import JobSpec
from hwbackend.jobs import Job, _tree
from hwbackend.score import Protocol, ScoreOptions, ScoreRequest, score
from hwbackend.timing import noise_margin, paired_ratios, ratio_spread, summarize

from conftest import HERE

CANDS = os.path.join(HERE, "candidates")
# a process that spins, and a child of it that spins: CPU time of the whole tree grows while it runs
SPINNER = "import os, time\nos.fork()\nwhile True: pass\n"


def _cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


@pytest.fixture
def spinning_job(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    job = Job(JobSpec("candidate", "all_reduce", 1, "gloo", 30.0))
    job.proc = subprocess.Popen([sys.executable, "-c", SPINNER], start_new_session=True)
    job.deadline = time.monotonic() + 30
    deadline = time.monotonic() + 10
    while len(_tree(job.proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    yield job
    job.resume()
    for pid in _tree(job.proc.pid):
        os.kill(pid, 9)
    job.proc.wait()


def test_a_paused_job_runs_nothing_until_resumed(spinning_job):
    pids = _tree(spinning_job.proc.pid)
    assert len(pids) == 2  # the spinner and its child
    spinning_job.pause()
    before = _cpu_ticks(pids)
    time.sleep(0.5)
    assert _cpu_ticks(pids) - before <= 1, "a paused job's processes went on running"
    deadline_then = spinning_job.deadline
    spinning_job.resume()
    assert spinning_job.deadline > deadline_then  # the time it was stopped is not charged to the job
    before = _cpu_ticks(pids)
    time.sleep(0.5)
    assert _cpu_ticks(pids) - before > 10, "a resumed job's processes did not run again"


def test_a_job_that_is_not_paused_runs_on(spinning_job):
    """The twin: the same tree, never paused, burns CPU in the same half second."""
    pids = _tree(spinning_job.proc.pid)
    before = _cpu_ticks(pids)
    time.sleep(0.5)
    assert _cpu_ticks(pids) - before > 10


def test_a_drift_that_moves_both_jobs_alike_is_not_noise_of_the_speed_up():
    """Launch 2 ran 30% slower on both sides (the machine's drift), and within launch 1 the machine slowed by
    half from its third batch on: each program's own launches differ by 30%, the batch-by-batch speed-ups not at
    all. The twin: launches whose speed-ups differ by 10% give a 10% margin."""
    ref = [[1.0, 1.01, 1.5, 1.51], [1.3, 1.31, 1.95, 1.96]]
    cand = [[1.0, 1.0, 1.51, 1.5], [1.31, 1.3, 1.96, 1.95]]
    assert noise_margin(ref) > 0.25 and noise_margin(cand) > 0.25
    turns = summarize(ref, cand, interleaved=True)
    assert turns.noise_margin == pytest.approx(0.02)  # the floor
    assert 0.98 < turns.ci95[0] <= 1.0 <= turns.ci95[1] < 1.02
    apart = summarize(ref, cand)  # the same batches judged as if one job had run after the other
    assert apart.noise_margin > 0.25 and apart.ci95[1] - apart.ci95[0] > 0.2
    assert ratio_spread(paired_ratios(ref, cand)) == pytest.approx(0.02)
    apart = [[1.0, 1.0, 1.0, 1.0], [1.1, 1.1, 1.1, 1.1]]
    same = [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    assert ratio_spread(paired_ratios(apart, same)) == pytest.approx(0.1 / 1.05)
    # one launch: its two halves
    assert ratio_spread([[1.0, 1.0, 1.1, 1.1]]) == pytest.approx(0.1 / 1.05)


def _turns(res) -> list[str]:
    rows = sorted(res.clock_check.batches, key=lambda b: b["at_s"])
    return [b["role"][0] for b in rows]


@pytest.mark.slow
@pytest.mark.skipif(not sandbox.wanted(), reason="jobs take turns only where each has a sandbox of its own")
def test_the_jobs_of_a_launch_take_turns_batch_by_batch(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    request = ScoreRequest("all_reduce", os.path.join(CANDS, "reference_copy.py"), 2, "gloo")
    res = score(request, Protocol(launches=1, batches=4, calls=2, timeout=60), ScoreOptions())
    assert res.correct and res.clock_check.interleaved, res
    turns = _turns(res)
    assert len(turns) == 8
    # each pair of turns is one batch of each job, the pair's order alternating (batch 0, untimed, went
    # reference first): c r | r c | c r | r c
    assert [set(turns[i:i + 2]) for i in range(0, 8, 2)] == [{"r", "c"}] * 4, turns
    assert turns[0::2] == ["c", "r", "c", "r"], turns
    # the twin: the same score with the jobs one after the other (--interleave off) runs every batch of one job first
    alone = score(request, Protocol(launches=1, batches=4, calls=2, timeout=60, interleave="off"), ScoreOptions())
    assert not alone.clock_check.interleaved and _turns(alone) == ["r"] * 4 + ["c"] * 4, _turns(alone)


@pytest.mark.skipif(not sandbox.wanted(), reason="jobs take turns only where each has a sandbox of its own")
@pytest.mark.parametrize("mode,backend,turns", [
    ("auto", "gloo", True), ("auto", "nccl", False), ("on", "nccl", True), ("off", "gloo", False)])
def test_by_default_jobs_take_turns_only_where_a_stop_stops_everything(mode, backend, turns):
    """A stopped process runs nothing on the CPU, but work it queued on a GPU runs on beside the other job's
    batch: `auto` takes turns with gloo only; `on` asks for it on GPUs too, `off` never."""
    from hwbackend.result import ScoreResult
    from hwbackend.score import _Scoring
    from tasks.registry import get
    request = ScoreRequest("all_reduce", os.path.join(CANDS, "reference_copy.py"), 1, backend)
    scoring = _Scoring(get("all_reduce"), request, Protocol(interleave=mode), ScoreOptions(), 1, None,
                       ScoreResult("r", "all_reduce"))
    assert scoring.interleave is turns
