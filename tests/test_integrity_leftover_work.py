"""Exploit class, on the scorer: returning at once and finishing the work in a thread that outlives the call.
A Python thread (background_thread.py) and a thread started below `threading` (background_native_thread.py)
are integrity, named; the honest twin does the same work in a thread it joins before returning (correct).
The rule itself: kernel-level threads that libraries start and keep are not leftover work; one that ends after
the call returned is."""
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


class _Readings:
    """A guard whose threads() returns the given readings in turn (then the last), on a clock of its own."""

    def __init__(self, *readings):
        self.readings, self.t = list(readings), 0.0

    def threads(self):
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def clock(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_a_kernel_level_thread_counts_where_it_ends_after_the_call_a_kept_one_does_not():
    before = ({1}, {"10"})
    ends = ({1}, {"10", "11"}), ({1}, {"10", "11"}), ({1}, {"10"})      # outlives the call, then ends
    kept = ({1}, {"10", "11"}),                                          # a library's helper: never ends
    exiting = ({1}, {"10", "11"}), ({1}, {"10"})                         # a joined thread still exiting
    one = ["1 thread(s) still running after solution returned"]
    assert leftover_threads(_Readings(*ends), before, first=False) == one
    assert leftover_threads(_Readings(*ends), before, first=True) == []   # the first call: libraries' start-up
    assert leftover_threads(_Readings(*kept), before, first=False) == []
    assert leftover_threads(_Readings(*exiting), before, first=False) == []
    assert leftover_threads(_Readings(({1, 2}, {"10"})), before, first=True) == one   # a Python thread: always
