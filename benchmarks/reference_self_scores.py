"""The reference against itself, scored again and again on gloo while CPU burners load the machine: how
often each status comes out. Identical code must never be "faster" (docs/scoring.md).

Starts `--burners` busy-loop processes (killed at the end, by their ids), then runs `pkb score --backend
gloo` of tests/candidates/reference_copy.py (an exact copy of the all_reduce reference) `--repeat` times
with the default protocol, each a fresh command as a user runs it, in the sandbox unless told. Prints one
line per score (status, speed-up, interval, margin) and the count of each status; no asserts.
Usage: python benchmarks/reference_self_scores.py [--repeat 20] [--burners 2] [--nproc 2] [--out FILE]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CANDIDATE = os.path.join(ROOT, "tests", "candidates", "reference_copy.py")


def score_once(nproc: int) -> dict:
    cmd = [sys.executable, "-m", "pkb.cli.main", "score", CANDIDATE, "--task", "all_reduce", "--backend", "gloo",
           "--nproc-per-node", str(nproc), "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = {"status": f"no result (exit {proc.returncode}): {proc.stderr.strip()[-200:]}"}
    doc["wall_s"] = time.perf_counter() - t0
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--out", help="also write every result document here (JSON)")
    args = ap.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)]
    results = []
    try:
        for i in range(args.repeat):
            doc = score_once(args.nproc)
            results.append(doc)
            ci = doc.get("speedup_ci95") or [None, None]
            fmt = (lambda v: "-" if v is None else f"{v:.2f}")
            print(f"{i + 1:2d} {doc['status']:<10} speed-up {fmt(doc.get('speedup'))}x "
                  f"(95% CI {fmt(ci[0])}-{fmt(ci[1])}), margin {fmt(doc.get('noise_margin'))}, "
                  f"{doc['wall_s']:.1f} s", flush=True)
    finally:
        for p in burners:
            p.kill()
            p.wait()
    counts = collections.Counter(doc["status"] for doc in results)
    print("statuses: " + ", ".join(f"{status} {n}" for status, n in counts.most_common()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
