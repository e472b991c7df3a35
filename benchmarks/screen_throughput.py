"""Screening throughput: every task's reference screened as a candidate with `pkb run`.

Each must pass with a predicted speed-up near 1 (the same program on both sides). Prints the batch's wall
time, the median screen time per candidate (the sum of its stages, measured inside the worker) and the
tasks that did not pass. Usage: python benchmarks/screen_throughput.py [--workers K] [--tasks SLUG ...]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from tasks.registry import all_tasks


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", nargs="*")
    ap.add_argument("--out", help="write the per-task results as JSON here")
    args = ap.parse_args()
    tasks = [t for t in all_tasks() if not args.tasks or t.slug in args.tasks]
    with tempfile.TemporaryDirectory() as d:
        for t in tasks:
            with open(os.path.join(d, f"{t.slug}.py"), "w") as f:
                f.write(f"from {t.module.__name__} import reference as solution\n")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pkb.cli.main", "run", d, "--db", os.path.join(d, "r.sqlite"),
                               "--workers", str(args.workers), "--seed", "1", "--json"],
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
    if proc.returncode:
        print(proc.stderr[-2000:])
        return 1
    rows = json.loads(proc.stdout)["results"]
    per = [sum(r["seconds"].values()) for r in rows]
    bad = [(r["task"], r["verdict"], r["stage"], (r["reasons"] or [{}])[0].get("message", "")[:100]) for r in rows
           if r["verdict"] != "pass"]
    speedups = [r["predicted"]["speedup"] for r in rows if r.get("predicted")]
    print(f"{len(rows)} references screened as candidates in {wall:.0f} s wall with {args.workers} workers "
          f"({os.cpu_count()} cores)")
    print(f"median screen time per candidate {statistics.median(per):.2f} s (max {max(per):.1f} s)")
    if speedups:
        print(f"predicted speed-up of reference vs itself: min {min(speedups):.3f}, max {max(speedups):.3f}")
    print(f"{len(rows) - len(bad)} passed, {len(bad)} did not:")
    for b in bad:
        print("  ", *b)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"wall_s": wall, "rows": rows}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
