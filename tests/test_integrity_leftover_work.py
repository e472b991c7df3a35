"""Exploit class, on the scorer: returning at once and finishing the work in a thread that outlives the call.
A Python thread (background_thread.py) and a thread started below `threading` (background_native_thread.py)
are integrity, named; the honest twin does the same work in a thread it joins before returning (correct).
The rule itself: kernel-level threads new at a library's first call are its helpers, not leftover work."""
import os

import pytest

from conftest import HERE
from hwbackend.guard import leftover_threads
from hwbackend.score import Protocol, ScoreRequest, score

CANDS = os.path.join(HERE, "candidates")


def _score(name):
    return score(ScoreRequest("all_reduce", os.path.join(CANDS, f"{name}.py"), 2, "gloo"),
                 Protocol(launches=1, batches=1, calls=2, timeout=60))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["background_thread", "background_native_thread"])
def test_work_left_running_after_return_is_integrity(name):
    res = _score(name)
    assert res.status == "integrity", res.findings
    assert any("still running after solution returned" in f.message for f in res.findings), res.findings


@pytest.mark.slow
def test_the_same_work_joined_before_return_is_correct():
    res = _score("joined_thread")
    assert res.correct, res.findings
    assert not any("still running" in f.message for f in res.findings), res.findings


def test_native_threads_count_after_the_first_call_python_threads_always():
    before, helper, both = ({1}, {"10"}), ({1}, {"10", "11"}), ({1, 2}, {"10", "11"})
    assert leftover_threads(before, helper, first=True) == []
    assert leftover_threads(before, helper, first=False) == ["1 thread(s) still running after solution returned"]
    assert leftover_threads(before, both, first=True) == ["1 thread(s) still running after solution returned"]
    assert leftover_threads(before, before, first=False) == []
