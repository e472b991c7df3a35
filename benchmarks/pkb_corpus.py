"""Screen ParallelKernelBench solution trees and print pass / reject by reason / inconclusive by limit per tree.

    python benchmarks/pkb_corpus.py --pkb-root CHECKOUT TREE [TREE ...] [--sample K] [--json OUT]

Each tree (a `solutions_*` folder, or the checkout's reference/ screened against itself) goes through
`pkb run --json` as a user would run it (the counts under pkb's rules and under ParallelKernelBench's, from
the same screens), with its own results store next to --out-dir, so a stopped run
resumes. `--sample K` screens every K-th file of each tree (sorted by name: a spread over the problem ids)
when the whole tree does not fit the time at hand. Numbers, not asserts: the table is the output.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time

from pkbsim.screen.result import ScreenResult, Semantics, Verdict

VERDICTS = ("pass", "reject", "inconclusive")


def tree_files(tree: str, sample: int) -> list[str]:
    files = sorted(f for f in os.listdir(tree) if f.endswith(".py") and not f.startswith("_"))
    return [os.path.join(tree, f) for f in files[::sample]]


def screen_tree(pkb: str, root: str, tree: str, files: list[str], db: str, extra: list[str]) -> tuple[list[dict], float]:
    """Rows of `pkb run --json` for the files, and the batch's wall time in seconds."""
    t0 = time.perf_counter()
    cmd = [pkb, "run", "--pkb-root", root, "--db", db, "--json", *extra, *files]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not proc.stdout.strip():
        sys.exit(f"pkb run failed on {tree} (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout)["results"], wall


def stored_rows(db: str, files: list[str]) -> tuple[list[dict], float]:
    """The rows a tree's store holds for these files (no wall time: the batch is not timed here)."""
    import sqlite3
    if not os.path.exists(db):
        return [], 0.0
    wanted = {os.path.abspath(f) for f in files}
    with sqlite3.connect(db) as con:
        rows = [json.loads(r) for (c, r) in con.execute("select candidate, result from screens")
                if os.path.abspath(c) in wanted]
    return rows, 0.0


def reason_key(res: ScreenResult) -> str:
    """The reason a row is grouped by: the first reason's kind, and for inconclusive rows its named limit."""
    if not res.reasons:
        return ""
    r = res.reasons[0]
    if res.verdict is Verdict.INCONCLUSIVE:
        return f"{r.kind}: {r.message.split(':')[0][:40]}"
    return str(r.kind)


def summarise(tree: str, rows: list[dict], files: int, wall: float) -> dict:
    """Counts per verdict under each rule set (a row of an older pkb has one verdict, counted under both), the
    reasons of the rows' verdicts under pkb's rules (every fault), and the faults only pkb's rules count."""
    by = {v: collections.Counter() for v in VERDICTS}
    rules = {s: collections.Counter() for s in Semantics}
    pkb_only = collections.Counter()
    for row in rows:
        res = ScreenResult.from_json(row)
        for s in Semantics:
            rules[s][res.under(s).verdict.value] += 1
        mine, bench = res.under(Semantics.PKB), res.under(Semantics.PARALLELKERNELBENCH)
        by.setdefault(mine.verdict.value, collections.Counter())[reason_key(mine)] += 1
        if bench.warnings and bench.verdict is not Verdict.REJECT:
            pkb_only[str(bench.warnings[0].kind)] += 1
    secs = [sum((r.get("seconds") or {}).values()) for r in rows if r.get("seconds")]
    return {"tree": os.path.basename(os.path.normpath(tree)), "files": files, "screened": len(rows),
            "counts": {str(s): dict(c) for s, c in rules.items()},
            "reasons": {v: dict(c.most_common()) for v, c in by.items() if v != "pass"},
            "pkb_only": dict(pkb_only.most_common()),
            "median_s": round(statistics.median(secs), 1) if secs else None, "wall_s": round(wall, 1)}


def print_table(summaries: list[dict]) -> None:
    head = (f"{'tree':52} {'files':>7} {'pkb: pass':>9} {'reject':>6} {'inconc':>6} {'PKB: pass':>9} {'reject':>6} "
            f"{'inconc':>6} {'median s':>8} {'wall s':>7}")
    print(head)
    print("-" * len(head))
    for s in summaries:
        a, b = s["counts"]["pkb"], s["counts"]["parallelkernelbench"]
        print(f"{s['tree'][:52]:52} {str(s['screened']) + '/' + str(s['files']):>7} {a.get('pass', 0):>9} "
              f"{a.get('reject', 0):>6} {a.get('inconclusive', 0):>6} {b.get('pass', 0):>9} {b.get('reject', 0):>6} "
              f"{b.get('inconclusive', 0):>6} {s['median_s'] or 0:>8} {s['wall_s']:>7}")
    for s in summaries:
        for verdict, reasons in s["reasons"].items():
            for key, n in reasons.items():
                print(f"  {s['tree'][:40]:40} {verdict:12} {n:>4}  {key}")
        for kind, n in s["pkb_only"].items():
            print(f"  {s['tree'][:40]:40} {'pkb only':12} {n:>4}  {kind} (a reject under pkb's rules alone)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", help="solution folders (or reference/) of a ParallelKernelBench checkout")
    ap.add_argument("--pkb-root", required=True, help="the checkout whose reference/ and utils/ define the problems")
    ap.add_argument("--sample", type=int, default=1, metavar="K", help="screen every K-th file of each tree")
    ap.add_argument("--out-dir", default="pkb_corpus_runs", help="results stores (one per tree) go here")
    ap.add_argument("--json", metavar="OUT", help="also write the summaries and rows as JSON")
    ap.add_argument("--pkb", default=os.path.join(os.path.dirname(sys.executable), "pkb"), help="the pkb command")
    ap.add_argument("--stored", action="store_true",
                    help="screen nothing: summarise the rows the stores already hold (a run still going or stopped)")
    args, extra = ap.parse_known_args()  # anything else (--workers, --world-size, --fresh...) goes to pkb run
    os.makedirs(args.out_dir, exist_ok=True)
    summaries, all_rows = [], {}
    for tree in args.trees:
        files = tree_files(tree, max(1, args.sample))
        db = os.path.join(os.path.abspath(args.out_dir), os.path.basename(os.path.normpath(tree)) + ".sqlite")
        rows, wall = stored_rows(db, files) if args.stored else screen_tree(args.pkb, args.pkb_root, tree, files,
                                                                             db, extra)
        summaries.append(summarise(tree, rows, len(files), wall))
        all_rows[tree] = rows
        print(f"pkb_corpus: {tree}: {len(rows)} rows in {wall:.0f} s", file=sys.stderr)
    print_table(summaries)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summaries": summaries, "rows": all_rows}, f, indent=1)


if __name__ == "__main__":
    main()
