"""Exploit class: a screen that gives no verdict (stopped, killed, or hung inside the sandbox). The process
outside the sandbox keeps the wall clock and the verdict of last resort: a screen past its bound is killed
and "inconclusive: time_limit" is printed as JSON; one that ends without printing is "inconclusive:
pkb_error"; a supervisor's line counts only where the screen printed nothing: a reject naming the cap on
processes or CPU time, inconclusive naming the cap on memory (the simulation's own state counts in it). Twin: a
screen that printed its verdict and exited keeps it, whatever its stderr holds."""
import json
import sys

import pytest

import candidate_sandbox as sandbox
from pkb.cli import _sandbox

ARGV = ["screen", "cand.py", "--task", "all_reduce", "--world-size", "2", "--json"]


def _relay(monkeypatch, relayed: sandbox.Relayed) -> None:
    monkeypatch.setattr(sandbox, "wanted", lambda: True)
    monkeypatch.setattr(sandbox, "run_inside", lambda *a, **k: relayed)


@pytest.mark.parametrize("relayed, code, verdict, kind", [
    (sandbox.Relayed(None, None), 3, "inconclusive", "time_limit"),
    (sandbox.Relayed(-9, None), 3, "inconclusive", "pkb_error"),
    (sandbox.Relayed(-9, "pkb sandbox: 300 processes with 300 threads ran in the sandbox, over its cap of 96", False),
     1, "reject", "resource_limit"),
    (sandbox.Relayed(-9, "pkb sandbox: 3 processes held 2.01 GiB of resident memory, over the sandbox's cap of 2 GiB",
                     False), 3, "inconclusive", "memory_limit"),
])
def test_a_screen_without_its_verdict_gets_one_from_outside(monkeypatch, capsys, relayed, code, verdict, kind):
    _relay(monkeypatch, relayed)
    assert _sandbox.run_wrapped(ARGV) == code
    res = json.loads(capsys.readouterr().out)
    assert (res["verdict"], res["reasons"][0]["kind"]) == (verdict, kind)


def test_the_twin_keeps_the_screens_own_verdict(monkeypatch, capsys):
    _relay(monkeypatch, sandbox.Relayed(0, "pkb sandbox: forged on stderr", True))
    assert _sandbox.run_wrapped(ARGV) == 0
    assert capsys.readouterr().out == ""   # nothing added to what the screen printed


def test_the_wall_clock_kills_a_command_that_outlives_it():
    relayed = sandbox.run_inside([sys.executable, "-c", "import time; time.sleep(60)"], [], [], timeout=3)
    assert relayed.code is None


def test_its_twin_finishing_in_time_keeps_its_code():
    relayed = sandbox.run_inside([sys.executable, "-c", "print('v'); raise SystemExit(1)"], [], [], timeout=60)
    assert (relayed.code, relayed.printed) == (1, True)
