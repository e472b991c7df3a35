"""`pkb leaderboard`: correctness, fast_p and geometric-mean speed-up per candidate group (by default the
candidate's folder: a ParallelKernelBench solution tree, i.e. a model).

With `pkb run --score` the same results file holds the screen's verdicts: a candidate the screen rejected
was not sent to the GPU and counts as a failure (the screen's verdict stands in for the GPU's); an
inconclusive one was sent like a pass and is counted apart, so the table says how much rests on the GPU.
The correct rate is shown under each rule set (docs/screening.md): the screen's rejects under pkb's rules, and
under ParallelKernelBench's, which do not count the faults its harness cannot see.
"""
from __future__ import annotations

import json
import os

from hwbackend import FAST_P, aggregate
from pkb.cli._arguments import add_db_argument
from pkb.errors import UsageError
from pkb.report.collect import ScreenCounts, with_screen_verdicts
from pkb.store import ScoreStore, ScreenStore
from pkbsim import Semantics


def add_parser(sub) -> None:
    p = sub.add_parser("leaderboard", help="aggregate scored runs: correctness, fast_p, geomean speed-up",
                       description="Aggregate the scored runs of a results file per model: correct count, fast_p "
                                   "and geomean speed-up. Exit: 0 printed (also when nothing is scored yet), 2 bad "
                                   "usage (no results file).")
    add_db_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object (rows per label)")
    p.set_defaults(run=run)


def run(args) -> int:
    if not os.path.isfile(args.db):
        raise UsageError(f"no results file {args.db!r}; run `pkb score` first or pass --db")
    latest, screens = ScoreStore(args.db).latest_runs(), ScreenStore(args.db).all()
    runs, counts = with_screen_verdicts(latest, screens, Semantics.PKB)
    bench_runs, bench_counts = with_screen_verdicts(latest, screens, Semantics.PARALLELKERNELBENCH)
    bench = {r.label: r for r in aggregate(bench_runs, n_boot=1)}
    rows = [(r, counts.get(r.label, ScreenCounts()), bench.get(r.label), bench_counts.get(r.label, ScreenCounts()))
            for r in aggregate(runs)]
    if args.json:
        print(json.dumps({"rows": [r.to_json() | c.to_json() | _under_benchmark(b, bc) for r, c, b, bc in rows]},
                         indent=1))
        return 0
    width = max([len("label")] + [len(r.label) for r, *_ in rows])
    head = ["candidates", "screen rej", "inconcl sent", "correct", "correct PKB"] + \
           [f"fast_{p:g}" for p in FAST_P] + ["unresolved", "geomean (95% CI)"]
    print(f"{'label':{width}s}  " + "  ".join(f"{h:>12s}" for h in head))
    for r, n, b, _ in rows:
        gm = (f"{r.geomean_speedup:.3f} ({r.geomean_ci95[0]:.2f}-{r.geomean_ci95[1]:.2f})"
              if r.geomean_speedup else "-")
        cells = [str(r.scored), str(n.screen_rejected), str(n.sent_inconclusive), f"{r.correct_rate:.2f}",
                 f"{b.correct_rate:.2f}" if b else "-"] + [f"{r.fast[p]:.2f}" for p in FAST_P] + \
                [str(r.unresolved), gm]
        print(f"{r.label:{width}s}  " + "  ".join(f"{c:>12s}" for c in cells))
    if any(r.untimed for r, *_ in rows):
        print("correctness-only scores count as correct (fast_0) and not faster for p > 0")
    print("fast_p: correct, and the whole 95% interval of the speed-up above p x (1 + the score's noise margin); "
          "unresolved: correct timed scores the clock could not tell from the reference (not ranked)")
    print("correct: the screen's rejects under pkb's rules count as failures; correct PKB: under "
          "ParallelKernelBench's rules (faults its harness cannot see do not count; GPU statuses as scored)")
    return 0


def _under_benchmark(row, counts) -> dict:
    """The correct count under ParallelKernelBench's rules, for `--json`."""
    return {"scored_parallelkernelbench": row.scored if row else 0,
            "correct_rate_parallelkernelbench": row.correct_rate if row else None,
            "screen_rejected_parallelkernelbench": counts.screen_rejected}
