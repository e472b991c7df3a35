"""Argument groups of the commands that screen (`pkb screen`, `pkb run`, `pkb refine`): the rule set, a
batch's limits, the sizes stage's budget, with the screen's defaults."""
from __future__ import annotations

import os

from pkb.errors import UsageError
from pkbsim import MARGIN, MEMORY_GB, RUN_TIMEOUT_S, SIZES_SECONDS, TIME_LIMIT_S, Semantics


def add_semantics_argument(p) -> None:
    """--semantics: whose rules decide the verdict (`pkb screen`, `pkb run`); a result holds both verdicts."""
    p.add_argument("--semantics", choices=[s.value for s in Semantics], default=None,
                   help="whose rules decide: pkb's scorer (fresh inputs every call, every timed call checked, no "
                        "aliasing) or ParallelKernelBench's harness (one call per correctness trial; faults only "
                        "pkb's rules see become warnings). Default: parallelkernelbench with --pkb-root, else pkb")


def semantics(args) -> Semantics:
    """The rule set chosen, or the default for the arguments (the benchmark's own for its checkouts)."""
    chosen = getattr(args, "semantics", None)
    if chosen:
        return Semantics(chosen)
    return Semantics.PARALLELKERNELBENCH if getattr(args, "parallelkernelbench_root", None) else Semantics.PKB


def add_batch_limits(p, workers_help: str = "parallel screening processes") -> None:
    """--margin, --timeout, --time-limit, --memory-gb, --workers: how a batch of screens runs (`pkb run`,
    `pkb refine`)."""
    p.add_argument("--margin", type=float, default=MARGIN, help="reject below this predicted speed-up")
    p.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, metavar="S", help="limit per simulated run")
    p.add_argument("--time-limit", type=float, default=TIME_LIMIT_S, metavar="S", help="limit per candidate's screen")
    p.add_argument("--memory-gb", type=float, default=MEMORY_GB, help="address-space limit per screening process")
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), metavar="K", help=workers_help)


def add_sizes_budget_argument(p) -> None:
    """--sizes-budget: the time the sizes stage may spend on a ParallelKernelBench problem (`pkb screen`, `pkb run`)."""
    p.add_argument("--sizes-budget", type=float, default=None, metavar="S",
                   help="seconds of candidate runs for the sizes stage of a ParallelKernelBench problem (larger sizes "
                        f"up to the full one; default {SIZES_SECONDS:g}, 0: none)")


def sizes_budget(args) -> float | None:
    """The --sizes-budget given (None: the screen's default); a negative one is a usage error."""
    budget = getattr(args, "sizes_budget", None)
    if budget is not None and budget < 0:
        raise UsageError("--sizes-budget must be 0 (no sizes stage) or more seconds")
    return budget
