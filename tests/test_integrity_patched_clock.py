"""Exploit class, on the scorer: a candidate that makes the worker under-report its time by patching the
time source the worker uses, by routes no check of names sees (the code of Guard.stop_timer swapped, the
Guard instance's clock replaced through gc, the control channel rewriting the reported seconds). Each does
the honest twin's work (the reference plus 50 ms of waiting per call) and reports a tenth of it; the
scorer's own clock over each batch, less the harness's overhead measured on the reference, disagrees with
the worker's times, and the finding names both numbers. The honest twin is timed with no such finding.
Asserts are on findings, never on speed."""
import os

import pytest

from hwbackend.score import Protocol, score

from conftest import HERE

CANDS = os.path.join(HERE, "clock_candidates")


def _score(name):
    protocol = Protocol(launches=1, batches=3, calls=2, warmup=1, timeout=120)
    return score("all_reduce", os.path.join(CANDS, f"{name}.py"), 2, "gloo", protocol)


def _clock_findings(res):
    return [f["message"] for f in res["findings"] if "scorer's clock" in f["message"]]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["swap_timer_code", "slow_guard_clock", "rewrite_reported_seconds"])
def test_a_patched_time_source_is_an_integrity_finding(name):
    res = _score(name)
    assert res["status"] == "integrity", res
    found = _clock_findings(res)
    assert found and all(" ms " in m and "worker" in m for m in found), res["findings"]


@pytest.mark.slow
def test_the_honest_twin_is_timed_without_a_clock_finding():
    res = _score("honest_sleeper")
    assert res["correct"] and res["status"] in ("slower", "faster"), res
    assert _clock_findings(res) == [], res["findings"]
