"""The two jobs of a launch take turns batch by batch (hwbackend/score.py `_interleaved`): while one job's batch
is timed the other is stopped from outside, and the noise margin is the spread of the launches' own speed-ups,
which a drift of the machine does not move."""
import os
import shutil
import signal
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
    res = score(request, Protocol(launches=1, batches=4, calls=2, timeout=60, interleave=True), ScoreOptions())
    assert res.correct and res.clock_check.interleaved, res
    assert not any("stopped" in f.message for f in res.findings), res.findings
    turns = _turns(res)
    # each pair of turns is one batch of each job (which goes first is drawn from the secret generator)
    assert len(turns) == 8 and [set(turns[i:i + 2]) for i in range(0, 8, 2)] == [{"r", "c"}] * 4, turns
    # the twin: by default one job runs after the other, every batch of one job first
    alone = score(request, Protocol(launches=1, batches=4, calls=2, timeout=60), ScoreOptions())
    assert not alone.clock_check.interleaved and _turns(alone) == ["r"] * 4 + ["c"] * 4, _turns(alone)


@pytest.mark.slow
@pytest.mark.skipif(not sandbox.wanted(), reason="jobs take turns only where each has a sandbox of its own")
def test_the_reference_outputs_are_off_the_disk_whenever_the_candidate_runs(tmp_path, monkeypatch):
    """The candidate's folder is next to the jobs' (so the reference's job folder is in its view): a candidate
    that returns the reference's saved outputs instead of communicating is "incorrect", because the reference's
    files are read into the scorer and deleted at the end of each of its turns, while the candidate is stopped.
    (Read at the end of the launch instead, they were there to copy: the review's run scored it correct.) The
    honest twin from the same folder is correct."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(jobs))
    for name in ("read_reference_outputs", "reference_copy"):
        shutil.copy(os.path.join(CANDS, f"{name}.py"), tmp_path / f"{name}.py")
    protocol = Protocol(launches=1, batches=2, calls=2, timeout=60, interleave=True)
    cheat = score(ScoreRequest("all_reduce", str(tmp_path / "read_reference_outputs.py"), 2, "gloo"), protocol,
                  ScoreOptions())
    assert cheat.status == "incorrect" and not cheat.correct, cheat
    honest = score(ScoreRequest("all_reduce", str(tmp_path / "reference_copy.py"), 2, "gloo"), protocol,
                   ScoreOptions())
    assert honest.correct, honest
    assert os.listdir(jobs) == [], os.listdir(jobs)  # no job folder left behind


def test_a_stopped_job_restarted_behind_the_scorer_s_back_is_seen(spinning_job):
    """The kernel sends SIGCONT to a process group it orphans while members are stopped, and a thread inside a
    long system call does not stop: either way the job's processes run on while the scorer believes them
    stopped. What they ran is measured from outside; the twin, left stopped, ran nothing."""
    spinning_job.pause()
    time.sleep(0.3)
    assert spinning_job.ran_while_stopped() < 0.002
    os.kill(spinning_job.stopped[-1], signal.SIGCONT)  # stands for the kernel's SIGCONT to an orphaned group
    deadline = time.monotonic() + 20  # a busy machine may give the spinner its CPU late
    while spinning_job.ran_while_stopped() <= 0.01 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert spinning_job.ran_while_stopped() > 0.01


@pytest.mark.skipif(not sandbox.wanted(), reason="jobs take turns only where each has a sandbox of its own")
@pytest.mark.parametrize("interleave,backend,turns", [
    (None, "gloo", False), (None, "nccl", False), (True, "gloo", True), (True, "nccl", True)])
def test_jobs_take_turns_only_when_asked(interleave, backend, turns):
    """Off by default (a stop does not reach work a candidate queued on a GPU, docs/threat_model.md)."""
    from hwbackend.result import ScoreResult
    from hwbackend.score import _Scoring
    from tasks.registry import get
    request = ScoreRequest("all_reduce", os.path.join(CANDS, "reference_copy.py"), 1, backend)
    protocol = Protocol() if interleave is None else Protocol(interleave=interleave)
    scoring = _Scoring(get("all_reduce"), request, protocol, ScoreOptions(), 1, None, ScoreResult("r", "all_reduce"))
    assert scoring.interleave is turns
