"""Exploit class, on the scorer: a candidate whose rank processes reach the machine (integrity_probe.py).
`pkb score`'s rank workers run in the sandbox, every rank of a job in one (torchrun and gloo keep working on
its own loopback): the probe reaches nothing and the candidate is correct. The twin is the same file with
the sandbox off, where every probe succeeds and it is scored incorrect."""
import pytest
from integrity_probe import probe  # noqa: F401 - the fixture

from hwbackend.score import Protocol, ScoreRequest, score


def _score(path):
    return score(ScoreRequest("all_reduce", str(path), 2, "gloo"), Protocol(launches=1, batches=1, calls=2, timeout=60))


@pytest.mark.slow
def test_a_scored_candidate_reaches_nothing_from_the_sandbox(probe):  # noqa: F811
    path, target = probe
    res = _score(path)
    assert res.correct, res.findings
    assert not target.exists()


@pytest.mark.slow
def test_without_the_sandbox_the_same_candidate_gets_out(probe, monkeypatch):  # noqa: F811
    path, target = probe
    monkeypatch.setenv("PKB_NO_SANDBOX", "1")
    res = _score(path)
    assert not res.correct and res.status == "incorrect", res
    assert target.read_text() == "written from a candidate"
