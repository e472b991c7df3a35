"""Argument groups that several commands share."""
from __future__ import annotations

import os

RESULTS_DB = "pkb_results.sqlite"  # where results go unless --db or PKB_DB says otherwise


def add_db_argument(p, where: str = "") -> None:
    """--db: the SQLite results file every command that stores or reads results shares."""
    p.add_argument("--db", default=os.environ.get("PKB_DB", RESULTS_DB), help="SQLite results file" + where)


def add_pkb_arguments(p) -> None:
    """--pkb-root and --pkb-dtype (`pkb screen`, `pkb run`, `pkb score`)."""
    from tasks.parallelkernelbench.checkout import DTYPES
    p.add_argument("--pkb-root", metavar="DIR", help="a ParallelKernelBench checkout whose problems become tasks")
    p.add_argument("--pkb-dtype", default=DTYPES[0], choices=DTYPES,
                   help=f"dtype of ParallelKernelBench inputs, as PKB's --dtype (default {DTYPES[0]})")
