"""`pkb score --graphs` (hwbackend/score.py Protocol.graphs, worker.py `capture`): each timed batch captured in a
CUDA graph on placeholders whose inputs are copied in after the capture. Where a batch cannot be captured the
score is timed again eagerly, both jobs, and says so; never the candidate's fault. On this CPU machine no
capture can happen, which is the fallback's own test; the capture itself runs on a GPU
(benchmarks/score_resolution_gpu.sh with GRAPHS=1)."""
import os
import tempfile
import time

import pytest
import torch

from hwbackend.jobs import JobFailure
from hwbackend.result import FailureKind
from hwbackend.score import Protocol, ScoreOptions, ScoreRequest, score
from hwbackend.worker import GraphUnavailable, _copy_into, _placeholders

from conftest import HERE

CANDS = os.path.join(HERE, "candidates")


@pytest.mark.slow
def test_a_score_that_cannot_be_captured_is_timed_again_eagerly_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    request = ScoreRequest("all_reduce", os.path.join(CANDS, "reference_copy.py"), 2, "gloo")
    said = []
    res = score(request, Protocol(launches=1, batches=2, calls=2, timeout=60, graphs=True),
                ScoreOptions(progress=said.append))
    assert res.correct and res.status in ("faster", "slower"), res
    assert res.clock_check.timed_as.startswith("eager (CUDA graphs: "), res.clock_check.timed_as
    assert "could not be captured" in res.clock_check.timed_as, res.clock_check.timed_as
    assert any("timed again without CUDA graphs" in line for line in said), said
    assert not any(f.kind == "graph_unavailable" for f in res.findings), res.findings
    assert "GraphUnavailable" in res.clock_check.graphs_log, res.clock_check.graphs_log  # the failed phase's own words
    spans = res.clock_check.jobs  # where the score's wall time went: each job's start, ready, end
    assert [j["role"] for j in spans] == ["reference", "candidate"], spans
    assert all(0 <= j["started_s"] <= j["ready_s"] <= j["ended_s"] for j in spans), spans
    # its twin, eager as asked: no second try
    said.clear()
    plain = score(request, Protocol(launches=1, batches=2, calls=2, timeout=60), ScoreOptions(progress=said.append))
    assert plain.correct and plain.clock_check.timed_as == "eager", plain.clock_check
    assert "graphs_log" not in plain.clock_check.to_json()
    assert not any("without CUDA graphs" in line for line in said), said


def _draw(n: int, host: torch.Tensor):
    return (torch.ones(4, 4, device="meta"), n, host, "sum")


def test_a_call_s_inputs_fit_the_placeholders_only_where_what_the_host_read_is_the_same():
    holders = _placeholders(_draw(3, torch.arange(3)))
    assert holders[0].device.type == "meta" and holders[0] is not _draw(3, torch.arange(3))[0]
    _copy_into(holders, _draw(3, torch.arange(3)))  # same numbers and host tensors: it fits
    with pytest.raises(GraphUnavailable, match="differs"):
        _copy_into(holders, _draw(4, torch.arange(3)))  # a number the capture read on the host
    with pytest.raises(GraphUnavailable, match="host tensors"):
        _copy_into(holders, _draw(3, torch.arange(3) + 1))
    with pytest.raises(GraphUnavailable, match="structure"):
        _copy_into(holders, _draw(3, torch.arange(3))[:3])


def test_each_call_s_module_input_gets_its_own_weights():
    drawn = [(torch.nn.Linear(2, 2), torch.ones(2, device="meta")) for _ in range(2)]
    holders = [_placeholders(drawn[0]) for _ in range(2)]
    assert holders[0][0] is not holders[1][0] and holders[0][0] is not drawn[0][0]
    for h, d in zip(holders, drawn):
        _copy_into(h, d)
    for h, d in zip(holders, drawn):
        assert torch.equal(h[0].weight, d[0].weight)
    assert not torch.equal(holders[0][0].weight, holders[1][0].weight)  # (two draws of Linear differ)


class _SilentJob:
    """A job whose ranks never answer: gather waits out the deadline it is given, as Job.gather does."""

    def __init__(self, seconds: float):
        self.deadline, self.seen = time.monotonic() + seconds, []

    def send_all(self, **msg):
        pass

    def send_each(self, message):
        pass

    def log_tail(self, n: int) -> str:
        return "Thread 0x1 (most recent call first):\n  File worker.py, line 160 in capture"[-n:]

    def gather(self):
        self.seen.append(self.deadline - time.monotonic())
        raise JobFailure(FailureKind.TIMEOUT, "no answer within 300 s from 1 of 1 rank(s) (0 answered); rank 0: "
                         "timed batch 0: capturing 9 calls in a CUDA graph")


def test_a_capture_that_hangs_is_timed_eagerly_after_a_bound_not_the_job_s_whole_limit():
    from hwbackend.score import GRAPH_STAGING_S, GraphsFailed, Plan, Seeds, _JobRun
    run = _JobRun.__new__(_JobRun)
    run.plan, run.n, run.job = Plan(Seeds(), 0, 0, 1, 1, graphs=True), 9, _SilentJob(300)
    with pytest.raises(GraphsFailed, match=f"capture of 9 calls took more than {GRAPH_STAGING_S:g} s .*rank 0: timed") \
            as failed:
        run.stage(1)
    assert "line 160 in capture" in failed.value.details  # the job's log, where the stacks were written
    assert run.job.seen[0] <= GRAPH_STAGING_S < 300, run.job.seen
    assert run.job.deadline - run.job.seen[0] > 200  # the job's own deadline back afterwards
    # its twin, eager: the job's own deadline, and a timeout stays a timeout
    run.plan, run.job = Plan(Seeds(), 0, 0, 1, 1), _SilentJob(300)
    with pytest.raises(JobFailure) as e:
        run.stage(1)
    assert not isinstance(e.value, GraphsFailed) and run.job.seen[0] > 200


def test_a_block_that_outlives_its_bound_writes_every_thread_s_stack_and_one_in_time_writes_none():
    import subprocess
    import sys
    prog = ("import time; from hwbackend.worker import stacks_after\n"
            "def capture_that_hangs(s):\n    time.sleep(s)\n"
            "with stacks_after({bound}):\n    capture_that_hangs(1.0)\n")
    late = subprocess.run([sys.executable, "-c", prog.format(bound=0.2)], capture_output=True, text=True, timeout=120)
    assert late.returncode == 0 and "capture_that_hangs" in late.stderr, late.stderr
    in_time = subprocess.run([sys.executable, "-c", prog.format(bound=30)], capture_output=True, text=True,
                             timeout=120)
    assert in_time.returncode == 0 and "capture_that_hangs" not in in_time.stderr, in_time.stderr


def test_a_job_captures_its_timed_batch_once_and_replays_it_for_every_later_batch(monkeypatch):
    from hwbackend.worker import Batch, Worker
    captured = []

    def capture(self, calls, label):
        captured.append((calls, label))
        return Batch(label, [()] * calls, [b""], object(), [])
    monkeypatch.setattr(Worker, "capture", capture)
    worker = Worker.__new__(Worker)
    worker.graph = None
    first = worker.timed_graph(5, "timed batch 0")
    again = worker.timed_graph(5, "timed batch 1")
    assert again is first and captured == [(5, "timed batch 0")]  # one capture for both batches
    assert again.label == "timed batch 1" and b"timed batch 1" in again.steps[0]  # a timeout names the batch
    other = worker.timed_graph(7, "timed batch 2")  # another length: captured anew
    assert other is not first and captured[-1] == (7, "timed batch 2")
