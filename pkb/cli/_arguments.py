"""Argument groups that several commands share."""
from __future__ import annotations


def add_pkb_arguments(p) -> None:
    """--pkb-root and --pkb-dtype (`pkb screen`, `pkb run`, `pkb score`)."""
    from tasks.parallelkernelbench.checkout import DTYPES
    p.add_argument("--pkb-root", metavar="DIR", help="a ParallelKernelBench checkout whose problems become tasks")
    p.add_argument("--pkb-dtype", default=DTYPES[0], choices=DTYPES,
                   help=f"dtype of ParallelKernelBench inputs, as PKB's --dtype (default {DTYPES[0]})")
