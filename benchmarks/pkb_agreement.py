"""Does the screen agree with the GPU? ParallelKernelBench solutions screened on simulated ranks and scored
on GPUs, at the same world size, and the confusion matrix of the two.

    # on the CPU: screen the trees (functional stage only), one results store per tree
    python benchmarks/pkb_corpus.py --pkb-root CHECKOUT TREE ... --out-dir SCREEN_DIR --world-size=1 --no-cost
    # on a GPU node: correctness-only scores, K at a time, one JSON line per file (a stopped run resumes)
    python benchmarks/pkb_agreement.py gpu --pkb-root CHECKOUT TREE ... --out GPU.jsonl --nproc-per-node 1
    # anywhere: the matrix and every disagreement
    python benchmarks/pkb_agreement.py table --screen-dir SCREEN_DIR [--screen-dir LATER_DIR] --gpu GPU.jsonl TREE ...
    # a tree with no GPU scores: each file's screen verdict, beside verdicts of another run (a JSON file id -> verdict)
    python benchmarks/pkb_agreement.py verdicts --screen-dir SCREEN_DIR [--screen-dir LATER_DIR] TREE [--compare OTHER.json]

The same commands run unchanged with --world-size=8 / --nproc-per-node 8 on an 8-GPU node. Rows are
matched by tree and file name, so the two sides may run on different machines with the checkout at
different paths. Numbers, not asserts: the table is the output.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SCREEN = ("pass", "reject", "inconclusive")
GPU = ("correct", "incorrect", "integrity", "error", "compile_error", "timeout")


def tree_files(tree: str) -> list[str]:
    return sorted(os.path.join(tree, f) for f in os.listdir(tree) if f.endswith(".py") and not f.startswith("_"))


def key(path: str) -> str:
    """tree/file: the same on every machine."""
    return f"{os.path.basename(os.path.dirname(os.path.abspath(path)))}/{os.path.basename(path)}"


def score_one(pkb: list[str], root: str, path: str, nproc: int, timeout: float, extra: list[str]) -> dict:
    t0 = time.perf_counter()
    db = os.path.join(tempfile.mkdtemp(prefix="pkb-agreement-"), "results.sqlite")  # one per score: no lock waits
    cmd = [*pkb, "score", path, "--pkb-root", root, "--nproc-per-node", str(nproc), "--correctness-only",
           "--timeout", str(timeout), "--db", db, "--json", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        res = json.loads(proc.stdout)
        row = {"status": res["status"], "findings": [f"{f['kind']}: {f['message'][:300]}" for f in res["findings"][:3]]}
    except (json.JSONDecodeError, KeyError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        row = {"status": "no_result", "findings": [f"exit {proc.returncode}: {tail[:300]}"]}
    return {"file": key(path), **row, "wall_s": round(wall, 1)}


def gpu(args) -> None:
    done = set()
    if os.path.exists(args.out):
        with open(args.out) as f:
            done = {json.loads(line)["file"] for line in f if line.strip()}
    files = [p for t in args.trees for p in tree_files(t) if key(p) not in done]
    print(f"pkb_agreement: {len(done)} done, {len(files)} to score, {args.jobs} at a time", file=sys.stderr)
    deadline = time.monotonic() + args.deadline
    extra = ["--backend", args.backend] if args.backend else []
    lock = threading.Lock()

    def task(path: str) -> None:
        if time.monotonic() > deadline:
            return
        row = score_one(args.pkb.split(), args.pkb_root, path, args.nproc_per_node, args.timeout, extra)
        with lock, open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")
            print(f"pkb_agreement: {row['file']}: {row['status']} ({row['wall_s']} s)", file=sys.stderr)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(task, files))


def screen_rows(screen_dirs: list[str], trees: list[str]) -> dict[str, dict]:
    """tree/file -> screen result; a later folder's row (a re-screen with later code) replaces an earlier's."""
    rows = {}
    for screen_dir, tree in ((d, t) for d in screen_dirs for t in trees):
        db = os.path.join(screen_dir, os.path.basename(os.path.normpath(tree)) + ".sqlite")
        if not os.path.exists(db):
            continue
        with sqlite3.connect(db) as con:
            for cand, result in con.execute("select candidate, result from screens"):
                if key(cand).split("/")[0] == os.path.basename(os.path.normpath(tree)):  # a store may hold others
                    rows[key(cand)] = json.loads(result)
    return rows


def reason(row: dict) -> str:
    r = (row.get("reasons") or [{}])[0]
    return f"{r.get('kind', '')}: {r.get('message', '')[:200]}" if r else ""


def table(args) -> None:
    screened = screen_rows(args.screen_dir, args.trees)
    with open(args.gpu) as f:
        scored = {r["file"]: r for r in map(json.loads, filter(str.strip, f))}
    both = sorted(set(screened) & set(scored))
    matrix = collections.Counter((screened[k]["verdict"], scored[k]["status"]) for k in both)
    cols = [c for c in GPU if any(m[1] == c for m in matrix)] + sorted({m[1] for m in matrix} - set(GPU))
    print(f"{len(both)} solutions screened and scored ({len(screened)} screened, {len(scored)} scored)")
    corner = "screen \\ GPU"
    print(f"{corner:14}" + "".join(f"{c:>15}" for c in cols) + f"{'total':>8}")
    for v in SCREEN:
        n = [matrix[(v, c)] for c in cols]
        print(f"{v:14}" + "".join(f"{x:>15}" for x in n) + f"{sum(n):>8}")
    decided = [k for k in both if screened[k]["verdict"] != "inconclusive"]
    agree = sum((screened[k]["verdict"] == "pass") == (scored[k]["status"] == "correct") for k in decided)
    print(f"\nThe screen decided {len(decided)}; {agree} agree with the GPU ({agree / max(len(decided), 1):.0%}).")
    for title, keys in (("Disagreements (screen pass but GPU not correct; screen reject but GPU correct):",
                         [k for k in decided if (screened[k]["verdict"] == "pass") != (scored[k]["status"] == "correct")]),
                        ("Inconclusive (sent to the GPU as passes are), and what the GPU said:",
                         [k for k in both if screened[k]["verdict"] == "inconclusive"])):
        print("\n" + title)
        for k in keys:
            v, s = screened[k]["verdict"], scored[k]["status"]
            gpu_said = " ".join("; ".join(scored[k]["findings"]).split())[:240]
            print(f"- {k}: screen {v} ({' '.join(reason(screened[k]).split())}); GPU {s} ({gpu_said})")
    stage_times(screened)


def file_id(k: str) -> str:
    return os.path.basename(k).split("_")[0]


def verdicts(args) -> None:
    """Each file's verdict under pkb's rules (and ParallelKernelBench's where they differ), its reason and stage
    seconds, the counts per verdict and reason, and where --compare names another run's verdicts, that one's."""
    screened = screen_rows(args.screen_dir, [args.tree])
    other = {}
    if args.compare:
        with open(args.compare) as f:
            other = json.load(f)["verdicts"]
    counts = collections.Counter()
    rows = sorted(screened.items(), key=lambda kv: int(file_id(kv[0])) if file_id(kv[0]).isdigit() else 0)
    print(f"{'id':>3} {'screen':12} {'kind':22} {'PKB rules':10} {'other run':28} {'s':>6}  reason")
    for k, row in rows:
        v = row["verdict"]
        kind = ((row.get("reasons") or [{}])[0]).get("kind", "")
        bench = (row.get("verdicts") or {}).get("parallelkernelbench", v)
        counts[(v, kind)] += 1
        secs = sum((row.get("seconds") or {}).values())
        msg = " ".join(reason(row).split(": ", 1)[-1].split())[:150] if kind else ""
        print(f"{file_id(k):>3} {v:12} {kind:22} {bench if bench != v else '':10} "
              f"{other.get(file_id(k), ''):28} {secs:6.1f}  {msg}")
    print(f"\n{len(screened)} files:", ", ".join(f"{v}{' ' + kind if kind else ''} {n}"
                                              for (v, kind), n in sorted(counts.items())))
    if other:
        same = sum(1 for k, row in rows if other.get(file_id(k), "").split(":")[0] == row["verdict"])
        print(f"Same verdict (pass / reject / inconclusive) as the other run: {same} of {len(rows)}")
    stage_times(screened)


def stage_times(screened: dict[str, dict]) -> None:
    """Seconds per stage over the screened files that ran it: median and worst (the sizes stage is the time the
    second-size and full-size runs add to a screen)."""
    print("\nSeconds per stage (files that ran it: median, worst):")
    stages = sorted({s for row in screened.values() for s in row.get("seconds", {})})
    for stage in stages:
        took = {k: row["seconds"][stage] for k, row in screened.items() if row.get("seconds", {}).get(stage)}
        if took:
            worst = max(took, key=took.get)
            print(f"- {stage}: {len(took)} files, median {statistics.median(took.values()):.1f} s, "
                  f"worst {took[worst]:.1f} s ({worst})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gpu", help="score every file correctness-only on this node's GPUs")
    g.add_argument("trees", nargs="+")
    g.add_argument("--pkb-root", required=True)
    g.add_argument("--out", required=True, help="JSON lines, appended (a stopped run resumes)")
    g.add_argument("--nproc-per-node", type=int, default=1)
    g.add_argument("--jobs", type=int, default=8, help="scores at a time (they share the GPUs)")
    g.add_argument("--timeout", type=float, default=300.0, help="per scoring job")
    g.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl where there are GPUs")
    g.add_argument("--deadline", type=float, default=1e9, help="start no score after this many seconds")
    g.add_argument("--pkb", default=f"{sys.executable} -m pkb.cli.main", help="the pkb command")
    t = sub.add_parser("table", help="the confusion matrix and the disagreements")
    t.add_argument("trees", nargs="+")
    t.add_argument("--screen-dir", required=True, action="append",
                   help="a folder of per-tree results stores; again for re-screens that replace its rows")
    t.add_argument("--gpu", required=True)
    v = sub.add_parser("verdicts", help="each file's screen verdict, for a tree with no GPU scores")
    v.add_argument("tree")
    v.add_argument("--screen-dir", required=True, action="append")
    v.add_argument("--compare", help="JSON {'verdicts': {file id: verdict}} of another run, e.g. at another world size")
    args = ap.parse_args()
    {"gpu": gpu, "table": table, "verdicts": verdicts}[args.cmd](args)


if __name__ == "__main__":
    main()
