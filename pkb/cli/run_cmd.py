"""`pkb run`: screen a batch of candidates in parallel, optionally score the survivors on this node's GPUs."""
from __future__ import annotations

import json
import os
import sys
import time

from pkb import batch
from pkb.cli._arguments import add_db_argument, add_parallelkernelbench_arguments, add_sandbox_argument, sandbox_ready
from pkb.cli._screen_arguments import (add_batch_limits, add_semantics_argument, add_sizes_budget_argument, semantics,
                                       sizes_budget)
from pkb.cli._table import print_table
from pkb.errors import UsageError
from pkb.resolve import checkout_of
from pkbsim import ScreenResult


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="screen a batch of candidates (and score the survivors)",
                       description="Screen candidate files (or folders of them, named by task) in parallel worker "
                                   "processes; results go row by row into the SQLite store, so a stopped run resumes. "
                                   "Without CANDIDATES: the known-good solutions and the broken-candidate set. "
                                   "Verdicts: pass, reject (the candidate's fault), inconclusive (a limit of pkb, "
                                   "named; scored on hardware like a pass). Exit: 0 done, 2 bad usage.")
    p.add_argument("candidates", nargs="*", help="candidate files or folders (default: the built-in set)")
    p.add_argument("--tasks", nargs="+", metavar="SLUG", help="only these tasks (one SLUG: every file is for it)")
    p.add_argument("--topology", metavar="NAME", help="machine to predict on (default hgx-h100; h100-ib-2node "
                                                      "for tasks of more than 8 ranks)")
    p.add_argument("--world-size", type=int, metavar="N", help="ranks (default: 8 where the task allows it)")
    add_batch_limits(p)
    p.add_argument("--seed", type=int, default=None, help="input seed for the whole batch (default: random)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local processes, or a Ray cluster (RAY_ADDRESS; `pip install 'pkb[ray]'`)")
    p.add_argument("--no-cost", action="store_true", help="stop each screen after the functional stage")
    add_sizes_budget_argument(p)
    p.add_argument("--score", action="store_true",
                   help="score the candidates that pass or are inconclusive on this node (pkb score)")
    p.add_argument("--correctness-only", action="store_true",
                   help="with --score: correctness trials only, no timing (hardware status 'correct')")
    add_parallelkernelbench_arguments(p)
    add_semantics_argument(p)
    add_db_argument(p)
    p.add_argument("--fresh", action="store_true", help="screen again even where the store has a result")
    p.add_argument("--json", action="store_true", help="print the batch's results as one JSON object")
    add_sandbox_argument(p)
    p.set_defaults(run=run)


def run(args) -> int:
    if args.workers < 1 or args.time_limit <= 0 or args.margin <= 0:
        raise UsageError("--workers, --time-limit and --margin must be positive")
    jobs, unpaired = batch.plan(request(args))
    for msg in unpaired:
        print(f"pkb run: skipped {msg}", file=sys.stderr)
    store = batch.open_store(args.db)
    results, todo = batch.resume(jobs, store, args.fresh)
    progress = _Progress(len(jobs), len(results), quiet=args.json)
    batch.screen(todo, store, results, executor=args.executor, workers=args.workers, time_limit=args.time_limit,
                 memory_gb=args.memory_gb, sandboxed=lambda: sandbox_ready(args),
                 on_result=lambda r: progress.advance(r.under(semantics(args))))
    progress.close()
    rows = [r.under(semantics(args)) for r in batch.in_order(jobs, results)]
    scores = batch.score(rows, args.db, args.correctness_only, None if args.json else _scoring) if args.score else {}
    if args.json:
        print(json.dumps({"db": os.path.abspath(args.db), "results": [r.to_json() for r in rows],
                          "scores": {k: v.to_json() for k, v in scores.items()}, "skipped": unpaired}, indent=1))
    else:
        print_table(rows, scores)
    return 0


def request(args) -> batch.BatchRequest:
    """The batch the arguments ask for, typed once here."""
    return batch.BatchRequest(args.db, tuple(args.candidates), tuple(args.tasks or ()), checkout_of(args),
                              args.topology, args.world_size, args.seed, args.margin, args.timeout,
                              not args.no_cost, sizes_budget(args))


def _scoring(r: ScreenResult, nproc: int, backend: str) -> None:
    print(f"pkb run: scoring {os.path.basename(r.candidate)} for {r.task} on {nproc} ranks ({backend})",
          file=sys.stderr)


class _Progress:
    """A progress bar on a terminal (rich's, with its estimate of the time left), one line per candidate
    otherwise, with an estimate of the time left from this run's pace (the store's rows took no time)."""

    def __init__(self, total: int, done: int, quiet: bool):
        self.total, self.done, self.quiet, self.bar = total, done, quiet, None
        self.started, self.resumed = time.monotonic(), done
        if not quiet and sys.stderr.isatty():
            from rich.progress import Progress
            self.bar = Progress(transient=True)
            self.bar.start()
            self.task = self.bar.add_task("screening", total=total, completed=done)
        elif not quiet and done:
            print(f"pkb run: {done} of {total} already in the store", file=sys.stderr)

    def advance(self, res: ScreenResult) -> None:
        self.done += 1
        if self.bar:
            self.bar.update(self.task, advance=1, description=f"screened {os.path.basename(res.candidate)}")
        elif not self.quiet:
            print(f"[{self.done}/{self.total}] {res.task}: {os.path.basename(res.candidate)}: {res.verdict.value} "
                  f"({res.stage}){self.left()}", file=sys.stderr)

    def left(self) -> str:
        """', about N min left' at this run's pace so far ('' once done)."""
        remaining, screened = self.total - self.done, self.done - self.resumed
        if remaining <= 0 or screened <= 0:
            return ""
        seconds = (time.monotonic() - self.started) / screened * remaining
        return f", about {seconds / 60:.0f} min left" if seconds >= 90 else f", about {seconds:.0f} s left"

    def close(self) -> None:
        if self.bar:
            self.bar.stop()
