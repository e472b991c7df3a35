"""`pkb screen` ends its process once the verdict is out, skipping the interpreter's teardown (main._leave): the
output is complete, the exit code is the verdict's, exit handlers still run; a command line handed to `main`
by a caller (a test, a tool) returns to it instead."""
import json
import os
import shutil
import subprocess
import sys

import candidate_sandbox
import pytest

from pkb.cli import main as cli_main
from pkb.cli import screen_cmd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD = os.path.join(ROOT, "tasks", "solutions", "all_reduce.py")
# `pkb` as its console script runs it, plus two witnesses written to the file named first: an exit handler's line,
# and a line from an object of __main__ that only the interpreter's teardown deletes
DRIVER = """
import atexit, os, sys
fd = os.open(sys.argv.pop(1), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
class TornDown:
    def __del__(self, write=os.write, fd=fd):   # what it needs, kept: the teardown clears modules too
        write(fd, b"torn down\\n")
kept = TornDown()
atexit.register(os.write, fd, b"exit handlers ran\\n")
from pkb.cli.main import main
sys.exit(main())
"""


def _pkb(tmp_path, *argv: str) -> tuple[subprocess.CompletedProcess, str]:
    witness = tmp_path / "witness.txt"
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(witness), *argv], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    return proc, witness.read_text() if witness.exists() else ""


def _screen(tmp_path, *extra: str) -> tuple[subprocess.CompletedProcess, str]:
    return _pkb(tmp_path, "screen", GOOD, "--task", "all_reduce", "--world-size", "2", "--no-cost", "--json",
                "--timeline", str(tmp_path / "timeline.json"), *extra)


def test_a_screen_leaves_without_the_teardown_and_with_its_whole_output(tmp_path):
    proc, witness = _screen(tmp_path, "--no-sandbox")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["verdict"] == "pass"
    assert witness == "exit handlers ran\n"


@pytest.mark.skipif(not candidate_sandbox.wanted() or not shutil.which("bwrap"), reason="no sandbox here")
def test_a_sandboxed_screen_relays_its_verdict_and_leaves_the_same_way(tmp_path):
    proc, witness = _screen(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["verdict"] == "pass"
    assert witness == "exit handlers ran\n"


def test_a_command_that_does_not_ask_for_it_exits_as_usual(tmp_path):
    proc, witness = _pkb(tmp_path, "tasks", "show", "all_reduce")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "all_reduce" in proc.stdout
    assert "exit handlers ran\n" in witness and "torn down\n" in witness


def test_main_called_with_a_command_line_returns_to_its_caller(monkeypatch):
    monkeypatch.setattr(screen_cmd, "run", lambda args: 3)
    assert cli_main.main(["screen", GOOD, "--task", "all_reduce", "--no-sandbox"]) == 3
