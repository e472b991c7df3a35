"""hwbackend with gloo on the CPU: the honest reference, each cheating candidate, and the scorer's math."""
import json
import os
import tempfile
import time

import pytest
import torch

from hwbackend.jobs import _children
from hwbackend.leaderboard import aggregate
from hwbackend.result import FailureKind, Finding, RunRecord, ScoreResult, Status
from hwbackend.score import Protocol, ScoreOptions, ScoreRequest, score
from hwbackend.timing import summarize
from pkb.store import ScoreStore, file_sha

from conftest import HERE

CANDS = os.path.join(HERE, "candidates")


def _score(name, nproc=2, db=None, resume=False, **kw):
    protocol = Protocol(**(dict(launches=1, batches=1, calls=2, timeout=30) | kw))
    return score(ScoreRequest("all_reduce", os.path.join(CANDS, f"{name}.py"), nproc, "gloo"), protocol,
                 ScoreOptions(store=ScoreStore(db) if db else None, resume=resume))


@pytest.fixture(autouse=True)
def job_root(tmp_path, monkeypatch) -> str:
    """The test's scoring jobs make their folders here, so that their processes (and any a candidate left
    behind, which inherit the job's folder and environment) can be told from other programs' on the machine."""
    root = tmp_path / "jobs"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return str(root)


def _no_leftovers(root: str):
    assert _children() == []
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(root) or root in env:
            left.append(pid)
    assert left == [], f"processes of this test's jobs still running: {left}"


@pytest.mark.slow
@pytest.mark.parametrize("nproc,launches", [(2, 2), (4, 1)])
def test_reference_as_candidate_is_correct_and_timed(nproc, launches, tmp_path, job_root):
    res = _score("reference_copy", nproc, launches=launches, batches=4, calls=4, db=str(tmp_path / "r.sqlite"))
    # correct, and timed; whether identical code is called faster is the statistics' job (summarize's own test
    # below): asserted here it failed under the machine's load (no timing asserts in tests)
    assert res.correct and res.status in ("slower", "faster"), res
    lo, hi = res.speedup_ci95
    assert lo <= res.speedup <= hi and res.reference_ms > 0 and res.candidate_ms > 0
    # the trials, and 2 checked calls of each batch: the 4 timed ones and the first, which settles untimed
    assert all(t.ok for t in res.trials) and len(res.trials) == nproc * (3 + launches * (4 + 1) * 2)
    # every timed batch by both clocks, per launch and role (the settling one is not timed)
    rows = res.clock_check.batches
    assert sorted((b["launch"], b["role"]) for b in rows) == sorted(
        (launch, role) for launch in range(launches) for role in ("reference", "candidate") for _ in range(4))
    assert all(b["calls"] == 4 and 0 < b["reported_ms"] <= b["wall_ms"] for b in rows), rows
    again = _score("reference_copy", nproc, db=str(tmp_path / "r.sqlite"), resume=True)
    assert again.resumed and again.status == res.status
    _no_leftovers(job_root)


@pytest.mark.slow
@pytest.mark.parametrize("name,status,needle", [
    ("cache_results", "incorrect", "trial1"),
    ("skip_communication", "incorrect", "trial0"),
    ("mutate_inputs", "integrity", "modified its inputs"),
    ("patch_timers", "integrity", "time.perf_counter was replaced"),
    ("patch_guard_timer", "integrity", "Guard.stop_timer was replaced"),
    ("mutate_inputs_hide_it", "integrity", "modified its inputs"),
    ("background_thread", "integrity", "thread(s) still running after solution returned"),
    ("slow_down_reference", "integrity", "still running after its job ended"),
    ("raises", "error", "bad shape on rank 1"),
    ("dies", "error", "a rank died without reporting"),
    ("dies_on_cuda_error", "error", "a rank died on a CUDA error: [rank1]: Process group watchdog"),
    ("syntax_error", "compile_error", "syntax_error.py:4"),
    ("build_error_on_first_call", "compile_error", "error"),
])
def test_cheating_and_broken_candidates(name, status, needle, job_root):
    res = _score(name, timeout=240 if "build" in name else 30)  # a host build on a busy 2-core machine: up to minutes
    assert res.status == status, res.findings
    assert any(needle in f.message for f in res.findings), res.findings
    assert not res.correct or res.status == "integrity"
    _no_leftovers(job_root)


@pytest.mark.slow
def test_deadlock_ends_in_timeout_naming_each_rank(job_root):
    t0 = time.monotonic()
    res = _score("deadlock", timeout=15)
    assert res.status == "timeout" and time.monotonic() - t0 < 60
    details = res.findings[0].details
    assert "rank 0:" in details and "rank 1: correctness trial 0" in details
    _no_leftovers(job_root)


def test_the_input_fingerprint_takes_scalars():
    """A 0-dim input (PKB problem 23's loss scale) cannot be viewed as bytes as it is: every candidate was an
    'error' on an H200 before the fingerprint flattened it."""
    from hwbackend.guard import fingerprint
    one, two = (torch.tensor(v, dtype=torch.bfloat16) for v in (1.0, 2.0))
    assert fingerprint([one]) == fingerprint([one.clone()]) != fingerprint([two])
    with pytest.raises(RuntimeError):
        one.view(torch.uint8)  # what the fingerprint did before


def test_summary_and_leaderboard_math():
    s = summarize([[1.0, 1.1, 0.9, 1.0]], [[0.5, 0.55, 0.45, 0.5]])
    assert s.speedup == pytest.approx(2.0) and s.faster and s.ci95[0] > 1.5
    same = summarize([[1.0, 1.1, 0.9, 1.0]], [[1.0, 1.05, 0.95, 1.0]])
    assert not same.faster
    def run(correct, speedup):
        return RunRecord("all_reduce", f"/m/{speedup}.py", "m", correct=correct, speedup=speedup)

    rows = aggregate([run(True, 2.0), run(True, 0.5), run(False, None), run(True, 1.2)])
    r = rows[0].to_json()
    assert r["scored"] == 4 and r["correct_rate"] == 0.75
    assert (r["fast_0"], r["fast_1"], r["fast_1.5"], r["fast_2"]) == (0.75, 0.5, 0.25, 0.0)
    assert r["geomean_speedup"] == pytest.approx((2.0 * 0.5 * 1.2) ** (1 / 3))
    assert list(r) == ["label", "scored", "correct_rate", "untimed", "fast_0", "fast_1", "fast_1.5", "fast_2",
                       "unresolved", "geomean_speedup", "geomean_ci95"]  # `pkb leaderboard --json`'s keys, in order
    untimed = aggregate([run(True, None), run(True, 2.0)])[0]
    assert (untimed.fast[0.0], untimed.fast[1.0], untimed.untimed) == (1.0, 0.5, 1)  # correctness-only: correct, not fast
    assert untimed.geomean_speedup == pytest.approx(2.0)


def test_fast_p_counts_only_what_the_clock_resolved():
    """A speed-up whose interval reaches into the noise margin is not ranked, however high its median: it is
    counted as unresolved. Its twin, the same median with a tight interval, counts as faster."""
    def run(speedup, ci, margin):
        return RunRecord("t", f"/m/{speedup}-{ci}.py", "m", correct=True, speedup=speedup, ci_lo=ci[0], ci_hi=ci[1],
                         noise_margin=margin)

    wide, tight = run(1.6, [0.9, 2.5], 0.03), run(1.6, [1.55, 1.65], 0.03)
    assert (wide.resolved, tight.resolved) == (False, True)
    (row,) = aggregate([wide, tight, run(0.8, [0.78, 0.82], 0.03)])
    assert (row.fast[1.0], row.fast[1.5], row.unresolved) == (pytest.approx(1 / 3), pytest.approx(1 / 3), 1)
    # a clearly slower score is resolved, and one within its margin on the slow side is not
    assert run(0.8, [0.78, 0.82], 0.03).resolved and not run(0.99, [0.975, 1.0], 0.03).resolved
    # 1.5 x 1.03: an interval from 1.53 clears p = 1.5, one from 1.52 does not
    assert aggregate([run(1.6, [1.55, 1.65], 0.03)])[0].fast[1.5] == 1.0
    assert aggregate([run(1.6, [1.52, 1.65], 0.03)])[0].fast[1.5] == 0.0


def test_store_round_trip(tmp_path):
    st = ScoreStore(str(tmp_path / "x.sqlite"))
    cand, twin = tmp_path / "c.py", tmp_path / "twin.py"
    cand.write_text("def solution(x):\n    return x\n")
    twin.write_text(cand.read_text())
    st.start("r1", "all_reduce", str(cand), "lab", 2, "gloo")
    st.trial("r1", "launch0", 0, 0, True, "")
    finding = Finding(FailureKind.EXCEPTION, 1, "ValueError: bad shape", details="Traceback ...")
    st.finish(ScoreResult("r1", "all_reduce", Status.SLOWER, True, 0.9, [0.8, 1.1], 1.0, 1.1, findings=[finding],
                          noise_margin=0.02))
    done = st.completed("all_reduce", str(twin), 2, "gloo")  # keyed by the content: the same file elsewhere
    assert done.to_json() == {"run_id": "r1", "status": "slower", "correct": True, "speedup": 0.9,
                              "speedup_ci95": [0.8, 1.1], "reference_ms": 1.0, "candidate_ms": 1.1,
                              "findings": [{"kind": "exception", "rank": 1, "message": "ValueError: bad shape",
                                            "details": "Traceback ..."}], "noise_margin": 0.02, "resumed": True}
    assert done.status is Status.SLOWER and done.findings == [finding]
    assert done.findings[0].kind is FailureKind.EXCEPTION  # typed again when read back
    latest = st.latest_runs()
    assert [(r.label, r.status, r.correct, r.speedup, r.nproc) for r in latest] == [("lab", Status.SLOWER, True, 0.9, 2)]
    doc = latest[0].to_json()  # `pkb report --json`'s score: the store's columns, correct as 0/1
    assert list(doc) == ["task", "candidate", "label", "nproc", "backend", "status", "correct", "speedup", "started",
                         "finished", "ci_lo", "ci_hi", "noise_margin"] and doc["correct"] == 1
    assert doc["status"] == "slower" and latest[0].resolved is False  # 0.8-1.1 reaches into the 2% margin
    assert RunRecord.from_json(doc) == latest[0]
    assert st.completed("all_reduce", str(cand), 2, "nccl") is None
    # the run's key is the one candidate hash the screens table keys by too
    assert st.db.execute("SELECT candidate_sha FROM runs").fetchall() == [(file_sha(str(cand)),)]
    twin.write_text("def solution(x):\n    return x.clone()\n")
    assert st.completed("all_reduce", str(twin), 2, "gloo") is None


def test_a_score_result_is_the_same_json_after_a_round_trip():
    doc = {"run_id": "r2", "task": "all_reduce", "status": "faster", "correct": True, "speedup": 1.5,
           "speedup_ci95": [1.2, 1.8], "reference_ms": 3.0, "candidate_ms": 2.0,
           "trials": [{"launch": 0, "call": "trial0", "rank": 0, "ok": True, "message": ""}],
           "findings": [{"kind": "integrity", "rank": None, "message": "the candidate modified its inputs"}],
           "noise_margin": 0.05, "clock_check": {"unexplained": 0.0, "tolerance": 0.01, "batches": [
               {"launch": 0, "role": "reference", "wall_ms": 41.2, "reported_ms": 40.9, "calls": 800}],
               "interleaved": True, "timed_as": "cuda graphs", "jobs": [
                   {"launch": 0, "role": "reference", "started_s": 0.0, "ready_s": 4.1, "ended_s": 9.8}]}}
    res = ScoreResult.from_json(doc)
    assert res.status is Status.FASTER and res.integrity and res.trials[0].ok
    assert json.dumps(res.to_json()) == json.dumps(doc)  # the same keys, in the same order
    failed = {"run_id": "r3", "task": "all_reduce", "status": "timeout", "correct": False, "speedup": None,
              "speedup_ci95": None, "reference_ms": None, "candidate_ms": None, "trials": [], "findings": []}
    assert json.dumps(ScoreResult.from_json(failed).to_json()) == json.dumps(failed)
    assert [FailureKind(k).status for k in ("cuda_error", "compile_error", "timeout", "node_failure")] == \
        [Status.ERROR, Status.COMPILE_ERROR, Status.TIMEOUT, Status.ERROR]


def _job_after_a_peer_error(tmp_path, log: str, second_reports: dict | None):
    """A job whose rank 0 reported a peer failure; rank 1 either reports its own error or died silently."""
    import socket

    from hwbackend.jobs import Job
    from hwbackend.protocol import Channel

    pairs = [socket.socketpair() for _ in range(2)]
    job = Job.__new__(Job)
    job.channels, job.dir, job.log, job.proc = [Channel(a) for a, _ in pairs], str(tmp_path), None, None
    (tmp_path / "job.log").write_text(log)
    if second_reports:
        Channel(pairs[1][1]).send(event="error", **second_reports)
    else:
        pairs[1][1].close()  # rank 1's process is gone
    first = {"event": "error", "kind": "exception", "rank": 0,
             "message": "RuntimeError: [pair.cc:537] Read error: Connection reset by peer."}
    return job._root_cause(first, job.channels[0])


def test_a_rank_that_died_silently_is_the_root_cause_not_its_peers_connection_error(tmp_path):
    died = _job_after_a_peer_error(tmp_path, "rank 1 starting\n", None)
    assert (died.kind, died.message) == ("error", "a rank died without reporting")
    cuda = _job_after_a_peer_error(tmp_path, "[rank1]: watchdog: CUDA error: an illegal memory access\n", None)
    assert cuda.kind == "cuda_error" and "illegal memory access" in cuda.message
    own = _job_after_a_peer_error(tmp_path, "", {"kind": "exception", "rank": 1, "message": "ValueError: bad shape"})
    assert (own.kind, own.rank, own.message) == ("exception", 1, "ValueError: bad shape")


def test_a_results_file_of_an_older_pkb_gains_the_noise_margin_column(tmp_path):
    import sqlite3
    path = str(tmp_path / "old.sqlite")
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, task TEXT, candidate TEXT, candidate_sha TEXT, label TEXT, "
                "nproc INTEGER, backend TEXT, status TEXT, correct INTEGER, speedup REAL, ci_lo REAL, ci_hi REAL, "
                "reference_ms REAL, candidate_ms REAL, findings TEXT, started REAL, finished REAL)")
    old.execute("INSERT INTO runs VALUES ('r0', 't', '/c.py', 's', 'lab', 1, 'nccl', 'faster', 1, 1.5, 1.4, 1.6, "
                "1.0, 0.7, '[]', 1.0, 2.0)")
    old.commit()
    old.close()
    (run,) = ScoreStore(path).latest_runs()
    assert (run.speedup, run.noise_margin, run.resolved) == (1.5, None, None)  # no margin stored: not judged
    assert aggregate([run])[0].fast[1.0] == 1.0  # counted by its speed-up, as that pkb counted it


def test_a_batch_is_long_against_the_overhead_spans_the_cache_and_fits_in_memory():
    from hwbackend.batch_size import BATCH_S, MAX_CALLS, WarmupReport, calls_per_batch
    mib = 2**20
    # 20 us a call: a batch of BATCH_S of calls
    assert calls_per_batch([WarmupReport(20e-6, 2 * mib, 2 * mib, 120 << 30, 50 * mib)], "nccl") == \
        round(BATCH_S["nccl"] / 20e-6)
    # the slowest rank decides the time, the largest the bytes
    assert calls_per_batch([WarmupReport(20e-6, 2 * mib, 2 * mib, 120 << 30, 50 * mib),
                            WarmupReport(40e-6, 2 * mib, 2 * mib, 120 << 30, 50 * mib)], "nccl") == \
        round(BATCH_S["nccl"] / 40e-6)
    # a slow call on small inputs: enough calls that the batch's inputs span three L2 caches
    assert calls_per_batch([WarmupReport(5e-3, 1 * mib, 1 * mib, 60 << 30, 50 * mib)], "nccl") == 150
    # tiny inputs: capped
    assert calls_per_batch([WarmupReport(1e-6, 1024, 1024, 60 << 30, 50 * mib)], "nccl") == MAX_CALLS
    # memory: a quarter of the free memory over one call's inputs and outputs
    assert calls_per_batch([WarmupReport(20e-6, 512 * mib, 512 * mib, 8 << 30, 50 * mib)], "nccl") == 2
    # a batch captured in a CUDA graph may take half of it (its calls are short: memory bounds the batch)
    assert calls_per_batch([WarmupReport(20e-6, 512 * mib, 512 * mib, 8 << 30, 50 * mib)], "nccl", graphs=True) == 4
    # the CPU: no cache or memory terms
    assert calls_per_batch([WarmupReport(1e-3, 8 * mib, 8 * mib)], "gloo") == round(BATCH_S["gloo"] / 1e-3)


def test_a_timing_reply_that_is_not_the_harness_s_counts_at_the_scorer_s_clock():
    """A candidate's process can rewrite what its rank sends: a reply without its seconds, or with text in
    them, must not end the trusted scorer with a traceback; it is an integrity finding and the batch counts
    at the scorer's own clock. Honest replies give the slowest rank's time."""
    from hwbackend.score import _reported
    found: list[str] = []
    assert _reported([{"seconds": [0.010]}, {"seconds": [0.012]}], 0.015, found) == 0.012 and found == []
    for forged in ({}, {"seconds": "fast"}, {"seconds": [None]}, {"seconds": 3}):
        found = []
        assert _reported([{"seconds": [0.010]}, forged], 0.015, found) == 0.015
        assert [f.message for f in found] == ["a rank's timing reply was not the harness's (seconds of its batch)"], forged


def test_findings_a_rank_rewrote_into_something_else_are_named_not_fatal():
    from hwbackend.protocol import said
    from hwbackend.score import _said
    got = _said({"findings": said(["output 0 aliases an input"], "trial0")})
    assert [(f.call, f.text, f.message) for f in got] == [("trial0", "output 0 aliases an input",
                                                            "trial0: output 0 aliases an input")]
    assert _said({}) == []
    for forged in (5, "abc", [1, 2], {"a": 1}, ["trial 0: a plain string"], [{"text": 3, "call": None}],
                   [{"text": "x", "call": 7}]):
        assert [f.message for f in _said({"findings": forged})] == [
            "a rank's reply was not the harness's (its findings)"], forged


def test_a_finding_keeps_its_call_through_json_and_a_stored_one_without_reads_back():
    from hwbackend.result import Finding
    f = Finding(Status.INCORRECT, 1, "no output saved", call="timed2-5")
    back = Finding.from_json(f.to_json())
    assert (back.call, back.text, back.message) == ("timed2-5", "no output saved", "timed2-5: no output saved")
    old = Finding.from_json({"kind": "integrity", "rank": None, "message": "trial 0: the candidate modified its inputs"})
    assert (old.call, old.message) == (None, "trial 0: the candidate modified its inputs")


def test_tables_show_each_speed_up_with_its_margin_and_mark_the_unresolved():
    from pkb.batch import summary_row
    from pkbsim.screen.result import ScreenResult
    screen = ScreenResult("t", "/m/c.py", 2, "hgx-h100", 0)
    wide = RunRecord("t", "/m/c.py", "m", status=Status.SLOWER, correct=True, speedup=1.3, ci_lo=0.9, ci_hi=1.7,
                     noise_margin=0.03)
    tight = RunRecord("t", "/m/c.py", "m", status=Status.FASTER, correct=True, speedup=1.3, ci_lo=1.25, ci_hi=1.35,
                      noise_margin=0.03)
    assert summary_row(screen, wide).measured_text == "1.30x ±3%~"
    assert summary_row(screen, tight).measured_text == "1.30x ±3%"
    assert summary_row(screen, None).measured_text == ""


@pytest.mark.slow
def test_a_candidate_faster_after_two_launches_is_timed_over_two_more(job_root, monkeypatch):
    """Two launches a side cannot show how far a process's own offset moves a score: a provisional "faster" is
    timed over as many launches again and judged on all of them. The twin: a provisional "slower" ends after
    two. (The rule's verdict is forced here: whether identical code is faster is the statistics' job.)"""
    import hwbackend.score as scoring
    from hwbackend.timing import Timing

    def run(faster: bool) -> list[str]:
        said: list[str] = []
        monkeypatch.setattr(scoring, "summarize", lambda r, c, t=0.0, i=False: Timing(1.5 if faster else 0.9, [1.4, 1.6],
                                                                              0.02, 1.0, 0.7, faster))
        res = score(ScoreRequest("all_reduce", os.path.join(CANDS, "reference_copy.py"), 2, "gloo"),
                    Protocol(launches=2, batches=1, calls=2, timeout=60), ScoreOptions(progress=said.append))
        assert res.correct, res
        return said
    confirmed = run(True)
    assert "faster over 2 launches: 2 more to confirm it" in confirmed, confirmed
    assert any(m.startswith("launch 4/4") for m in confirmed), confirmed
    assert not any(m.startswith("launch 3/") for m in run(False))
