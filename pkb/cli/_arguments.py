"""Argument groups that several commands share (the screen's own: _screen_arguments.py). Nothing of the
simulator here: `pkb score` uses these and loads no part of it."""
from __future__ import annotations

import os

import candidate_sandbox as sandbox
from pkb.errors import UsageError
from tasks.parallelkernelbench.naming import DEFAULT_DTYPE, DTYPES

RESULTS_DB = "pkb_results.sqlite"  # where results go unless --db or PKB_DB says otherwise


def add_db_argument(p, where: str = "") -> None:
    """--db: the SQLite results file every command that stores or reads results shares."""
    p.add_argument("--db", default=os.environ.get("PKB_DB", RESULTS_DB), help="SQLite results file" + where)


def add_parallelkernelbench_arguments(p) -> None:
    """--pkb-root and --pkb-dtype (`pkb screen`, `pkb run`, `pkb score`, `pkb refine`), also spelled out as
    --parallelkernelbench-root and --parallelkernelbench-dtype ("pkb" is this project's name too)."""
    p.add_argument("--pkb-root", "--parallelkernelbench-root", dest="parallelkernelbench_root", metavar="DIR",
                   help="a ParallelKernelBench checkout whose problems become tasks")
    p.add_argument("--pkb-dtype", "--parallelkernelbench-dtype", dest="parallelkernelbench_dtype",
                   default=DEFAULT_DTYPE, choices=DTYPES,
                   help=f"dtype of ParallelKernelBench inputs, as ParallelKernelBench's --dtype "
                        f"(default {DEFAULT_DTYPE})")


def add_sandbox_argument(p, opt_in: bool = False) -> None:
    """--no-sandbox (and --sandbox where it is opt-in): every command that runs a candidate's code."""
    if opt_in:
        p.add_argument("--sandbox", action="store_true",
                       help="run the script inside the candidate sandbox (bubblewrap: no network, read-only system)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run candidates without the bubblewrap sandbox (no isolation from this machine)")


def sandbox_ready(args) -> bool:
    """Whether the command's candidate processes go into the sandbox; a one-line error when they should
    and cannot."""
    if getattr(args, "no_sandbox", False) or not sandbox.wanted():
        return False
    try:
        sandbox.check()
    except sandbox.SandboxUnavailable as e:
        raise UsageError(str(e)) from None
    return True
