"""`pkb report`: the batch's table, screening quality against hardware, and timelines."""
from __future__ import annotations

import json
import os
import sys

from pkb.cli._arguments import add_db_argument
from pkb.cli._table import print_table
from pkb.errors import UsageError
from pkb.report.collect import collect
from pkb.report.html_page import render


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="results of screened (and scored) candidates from the store",
                       description="The batch's table (screen verdict, reasons, predicted and measured speed-up), "
                                   "screening quality where hardware results exist (confusion matrix, rank "
                                   "correlation, GPU hours saved), timelines. Exit: 0, 2 bad usage.")
    add_db_argument(p)
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML page")
    p.add_argument("--timeline", metavar="CANDIDATE", help="print the simulated critical path of one candidate "
                                                           "(file name) and the path of its Chrome trace")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args) -> int:
    if not os.path.isfile(args.db):
        raise UsageError(f"no results store at {args.db}; run `pkb run` first or pass --db FILE")
    rep = collect(args.db)
    if args.timeline:
        return _timeline(rep, args)
    if args.html:
        skipped: list[str] = []
        page = render(rep, f"pkb report: {os.path.basename(args.db)}", skipped)
        with open(args.html, "w") as f:
            f.write(page)
        for note in skipped:  # one line each, never a traceback: timelines are written where candidates run
            print(f"pkb report: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps({**rep.to_json(), "html": args.html}, indent=1))
        return 0
    print_table([r.screen for r in rep.rows], {r.screen.candidate: r.score for r in rep.rows if r.score})
    for verdict, counts in sorted(rep.confusion.items()):
        print(f"screen {verdict}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if rep.spearman is not None:
        print(f"rank correlation of predicted and measured speed-ups: {rep.spearman:.2f} ({len(rep.pairs)} pairs)")
    for n in rep.notes:
        print(n)
    for t in rep.trajectories:
        print(f"refine {t['run']} {t['task']}: " + " -> ".join(
            s["verdict"] + (f" ({s['why']})" if s.get("why") else "")
            + (f" {s['speedup']:.2f}x" if s.get("speedup") is not None else "") for s in t["steps"]))
    if args.html:
        print(f"wrote {args.html}")
    return 0


def _timeline(rep, args) -> int:
    named = (args.timeline, args.timeline + ".py")
    rows = [r.screen for r in rep.rows if os.path.basename(r.screen.candidate) in named]
    if not rows:
        raise UsageError(f"no screened candidate named {args.timeline!r} in {args.db}; `pkb report` lists them")
    for r in rows:
        p = r.predicted
        out = {"task": r.task, "candidate": r.candidate, "timeline": r.timeline,
               "critical_path": p.critical_path if p else [], "bottleneck": p.bottleneck if p else None}
        if args.json:
            print(json.dumps(out, indent=1))
            continue
        print(f"{r.task} / {os.path.basename(r.candidate)}: {p.bottleneck if p else 'no prediction'}")
        for c in out["critical_path"]:
            print(f"  rank {c['rank']} stream {c['stream']}: {c['name']} {c['start_us']:.1f} -> {c['end_us']:.1f} us"
                  f"  {c['site']}")
        print(f"  timeline: {out['timeline']} (open in ui.perfetto.dev)")
    return 0
