"""Exploit class, on the scorer: a candidate that makes the worker under-report its time by patching the
time source the worker uses, by routes no check of names sees (the code of Guard.stop_timer swapped, the
Guard instance's clock replaced through gc, the control channel rewriting the reported seconds). Each does
the honest twin's work (the reference plus 50 ms of waiting per call) and reports a tenth of it; the
scorer's own clock over each batch, less the harness's overhead measured on the reference, disagrees with
the worker's times, and the finding names both numbers. The honest twin is timed with no such finding.
Asserts are on findings, never on speed."""
import os

import pytest

from hwbackend.clock_check import SETTLED, BatchClock, cross_check
from hwbackend.score import Protocol, ScoreRequest, score

from conftest import HERE

CANDS = os.path.join(HERE, "clock_candidates")


def _score(name):
    protocol = Protocol(launches=1, batches=3, calls=2, warmup=1, timeout=120)
    return score(ScoreRequest("all_reduce", os.path.join(CANDS, f"{name}.py"), 2, "gloo"), protocol)


def _clock_findings(res):
    return [f.message for f in res.findings if "scorer's clock" in f.message]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["swap_timer_code", "slow_guard_clock", "rewrite_reported_seconds"])
def test_a_patched_time_source_is_an_integrity_finding(name):
    res = _score(name)
    assert res.status == "integrity", res
    found = _clock_findings(res)
    assert found and all(" ms " in m and "worker" in m for m in found), res.findings


@pytest.mark.slow
def test_the_honest_twin_is_timed_without_a_clock_finding():
    res = _score("honest_sleeper")
    assert res.correct and res.status in ("slower", "faster"), res
    assert _clock_findings(res) == [], res.findings


# the rule itself, on batches as both clocks saw them (seconds): a reference with 0.1 ms of harness overhead
# per call and a few microseconds of jitter, GPU-like
REFERENCE = [BatchClock(0.0104, 0.0100, 4), BatchClock(0.01041, 0.01, 4), BatchClock(0.01039, 0.01, 4)]


def test_batches_that_agree_with_the_scorer_clock_have_no_finding():
    honest = [BatchClock(0.0204, 0.0200, 4), BatchClock(0.02045, 0.0200, 4), BatchClock(0.0204, 0.02, 4)]
    agreement = cross_check(REFERENCE, honest, "nccl")
    assert agreement.findings == [] and agreement.unexplained < agreement.tolerance < 0.05


def test_batches_reporting_a_tenth_of_their_time_are_named_with_both_numbers():
    patched = [BatchClock(0.0204, 0.0020, 4)] * 3
    (finding,) = cross_check(REFERENCE, patched, "nccl").findings
    assert "reported 6.000 ms for 3 batches that took 61.200 ms by the scorer's clock" in finding, finding


def test_a_patch_that_hides_a_tenth_is_seen_and_one_disturbed_batch_is_not():
    shaved = [BatchClock(0.0204, 0.0180, 4)] * 3
    assert cross_check(REFERENCE, shaved, "nccl").findings
    disturbed = [BatchClock(0.0404, 0.0200, 4), BatchClock(0.0204, 0.0200, 4), BatchClock(0.0204, 0.0200, 4)]
    assert cross_check(REFERENCE, disturbed, "nccl").findings == []


def test_a_worker_reporting_more_than_the_scorer_saw_is_named():
    (finding,) = cross_check(REFERENCE, [BatchClock(0.0100, 0.0200, 4)], "nccl").findings
    assert "reported 20.000 ms for a batch that took 10.000 ms" in finding


def test_one_disturbed_reference_batch_does_not_widen_the_tolerance():
    """A reference batch delayed by 20 ms (a first batch's lazy set-up, a preemption) must not make the
    tolerance, and with it the noise margin, many times a 10 ms batch: on an H200 the largest deviation
    made it 13.8 times, and no candidate could be faster."""
    disturbed = REFERENCE + [BatchClock(0.0304, 0.0100, 4)]
    honest = [BatchClock(0.0104, 0.0100, 4)] * 3
    assert cross_check(disturbed, honest, "nccl").tolerance < 0.1
    assert cross_check(disturbed, [BatchClock(0.0104, 0.0010, 4)] * 3, "nccl").findings


def test_a_patch_hiding_3_percent_is_seen_once_the_reference_s_overhead_is_measured_on_enough_batches():
    """Half the reference's overhead per batch is slack only while few reference batches measured it: with
    SETTLED of them the tolerance is the jitter's and a 0.3 ms patch on a 10.4 ms batch shows; with 3 it hides."""
    settled = REFERENCE * (SETTLED // len(REFERENCE) + 1)
    shaved = [BatchClock(0.0104, 0.0097, 4)] * 3
    assert cross_check(settled, shaved, "nccl").findings
    assert cross_check(REFERENCE, shaved, "nccl").findings == []
    honest = [BatchClock(0.0104, 0.0100, 4), BatchClock(0.01043, 0.0100, 4), BatchClock(0.01041, 0.0100, 4)]
    assert cross_check(settled, honest, "nccl").findings == []
    assert cross_check(settled, honest, "nccl").tolerance < cross_check(REFERENCE, honest, "nccl").tolerance


def _judged_over_two_launches(candidate_batches: list[list[BatchClock]]) -> list[str]:
    """The scorer's clock findings after two launches of 2 batches each (the reference steady)."""
    from hwbackend.result import ScoreResult
    from hwbackend.score import JobResult, ScoreOptions, _Scoring
    from tasks.registry import get
    request = ScoreRequest("all_reduce", os.path.join(CANDS, "swap_timer_code.py"), 2, "gloo")
    scoring = _Scoring(get("all_reduce"), request, Protocol(launches=2, batches=2), ScoreOptions(), 2, None,
                       ScoreResult("r", "all_reduce"))
    steady = [BatchClock(0.0102, 0.0100, 4)] * 2
    for launch, batches in enumerate(candidate_batches):
        jobs = {"reference": JobResult([], "", clocks=steady, starts=[0.0, 0.0]),
                "candidate": JobResult([], "", clocks=batches, starts=[0.0, 0.0])}
        scoring.clocks(launch, ("reference", "candidate"), jobs)
    return [f.message for f in scoring.clock_findings]


def test_one_preempted_batch_of_a_short_launch_is_no_clock_finding():
    """Judged launch by launch, a launch of 2 batches with one preempted for 50 ms (a loaded machine) made the
    reference against itself "integrity" (tests/test_pkb_scoring.py under the whole suite): the median of two
    is their mean. Judged on both launches' batches together, it is one of four."""
    preempted, steady = BatchClock(0.0602, 0.0100, 4), BatchClock(0.0102, 0.0100, 4)
    assert _judged_over_two_launches([[preempted, steady], [steady, steady]]) == []


def test_its_twin_a_clock_patched_in_every_batch_is_still_named():
    patched = BatchClock(0.1002, 0.0100, 4)  # a tenth of each batch reported
    (finding,) = _judged_over_two_launches([[patched, patched], [patched, patched]])
    assert "unaccounted for" in finding
