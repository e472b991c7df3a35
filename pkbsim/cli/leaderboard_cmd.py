"""`pkb leaderboard`: correctness, fast_p and geometric-mean speed-up per candidate group."""
from __future__ import annotations

import json
import os

from pkbsim.cli.errors import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("leaderboard", help="aggregate scored runs: correctness, fast_p, geomean speed-up")
    p.add_argument("--db", default=os.environ.get("PKB_DB", "pkb_results.sqlite"), help="SQLite results file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(args) -> int:
    from hwbackend.leaderboard import FAST_P, aggregate
    from hwbackend.store import Store

    if not os.path.isfile(args.db):
        raise UsageError(f"no results file {args.db!r}; run `pkb score` first or pass --db")
    rows = aggregate(Store(args.db).latest_runs())
    if args.json:
        print(json.dumps({"rows": rows}, indent=1))
        return 0
    head = ["label", "scored", "correct"] + [f"fast_{p:g}" for p in FAST_P] + ["geomean (95% CI)"]
    print("  ".join(f"{h:>12s}" for h in head))
    for r in rows:
        gm = (f"{r['geomean_speedup']:.3f} ({r['geomean_ci95'][0]:.2f}-{r['geomean_ci95'][1]:.2f})"
              if r["geomean_speedup"] else "-")
        cells = [r["label"], str(r["scored"]), f"{r['correct_rate']:.2f}"] + \
                [f"{r[f'fast_{p:g}']:.2f}" for p in FAST_P] + [gm]
        print("  ".join(f"{c:>12s}" for c in cells))
    return 0
