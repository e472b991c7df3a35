"""Precision, recall and conclusiveness of `pkb check` on the labelled corpus, per bug family.

Runs every program of tests/corpus at every world size its header lists and prints one row per family
(plus misclassified runs). `--corpus tests/corpus_cuda` scores the inline-CUDA corpus (needs nvcc; each
program's extension is built once, about a minute, and cached).
Usage: python benchmarks/corpus_report.py [--json] [--corpus DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

from pkb.corpus import load_corpus, run_case, score

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "corpus")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=ROOT)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cases = load_corpus(args.corpus)
    from pkbsim.ptx.compile import find_nvcc
    if find_nvcc() is None and any("load_inline" in pathlib.Path(c.path).read_text() for c in cases):
        print("nvcc not found: the corpus builds inline-CUDA extensions; install the CUDA toolkit or set CUDA_HOME",
              file=sys.stderr)
        return 2
    runs = [(c, n) for c in cases for n in c.world_sizes]
    outcomes, t0 = [], time.perf_counter()
    for i, (case, n) in enumerate(runs, 1):
        o = run_case(case, n)
        outcomes.append(o)
        print(f"[{i}/{len(runs)}] {case.name} @{n}: {o.verdict}" + ("" if o.correct else f"  (expected {case.expect})"),
              file=sys.stderr)
    table = score(outcomes)
    wrong = [o for o in outcomes if not o.correct]
    if args.json:
        print(json.dumps({"families": table, "programs": len(cases), "runs": len(runs),
                          "wall_s": round(time.perf_counter() - t0, 1),
                          "misclassified": [{"case": o.case.name, "world_size": o.world_size, "verdict": o.verdict,
                                             "expected": o.case.expect, "message": o.message} for o in wrong]}))
        return 0
    print(f"{'family':8s} {'runs':>5s} {'TP':>4s} {'FN':>4s} {'TN':>4s} {'FP':>4s} {'precision':>9s} {'recall':>7s} "
          f"{'conclusive':>10s}")
    for fam in sorted(table):
        r = table[fam]
        print(f"{fam:8s} {r['runs']:5d} {r['tp']:4d} {r['fn']:4d} {r['tn']:4d} {r['fp']:4d} {r['precision']:9.2f} "
              f"{r['recall']:7.2f} {r['conclusiveness']:10.2f}")
    tot = {k: sum(r[k] for r in table.values()) for k in ("runs", "tp", "fn", "tn", "fp", "inconclusive")}
    print(f"{'all':8s} {tot['runs']:5d} {tot['tp']:4d} {tot['fn']:4d} {tot['tn']:4d} {tot['fp']:4d} "
          f"{tot['tp'] / max(1, tot['tp'] + tot['fp']):9.2f} {tot['tp'] / max(1, tot['tp'] + tot['fn']):7.2f} "
          f"{1 - tot['inconclusive'] / max(1, tot['runs']):10.2f}")
    print(f"{len(cases)} programs, {len(runs)} runs, {time.perf_counter() - t0:.1f} s")
    for o in wrong:
        print(f"MISCLASSIFIED {o.case.name} @{o.world_size}: {o.verdict} (expected {o.case.expect}): {o.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
