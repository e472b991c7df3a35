"""Screening hostile candidates (hostile_candidates/) the way a user does: `pkb screen` and `pkb run` in
processes of their own, each with a wall-clock bound, so that an attack that stalls pkb fails its test
instead of hanging the suite."""
import json
import os
import subprocess
import sys

HOSTILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_candidates")
PKB = [sys.executable, "-c", "import sys; from pkb.cli.main import main; sys.exit(main())"]
BOUND_S = 600


def path(name: str) -> str:
    return os.path.join(HOSTILE, name)


def screen(name: str, *extra: str) -> tuple[int, dict, str]:
    """(exit code, the one JSON document on stdout, stderr) of `pkb screen` on a hostile candidate."""
    proc = subprocess.run([*PKB, "screen", path(name), "--task", "all_reduce", "--world-size", "2", "--no-cost",
                           "--json", *extra], capture_output=True, text=True, timeout=BOUND_S)
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def run(names: list[str], db: str) -> dict[str, dict]:
    """`pkb run` of these candidates in one worker: each file's row, by file name."""
    proc = subprocess.run([*PKB, "run", *map(path, names), "--tasks", "all_reduce", "--world-size", "2",
                           "--workers", "1", "--no-cost", "--db", db, "--json"],
                          capture_output=True, text=True, timeout=BOUND_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {os.path.basename(r["candidate"]): r for r in json.loads(proc.stdout)["results"]}
