"""Aggregates of many scored candidates: correctness rate, fast_p and geometric-mean speed-up.

fast_p (KernelBench's metric): the fraction of all scored (task, candidate) pairs that are correct AND
faster than p times the reference; failures stay in the denominator (fast_0 is the correctness rate: a
correctness-only score counts there, untimed, and as not faster for p > 0). The geometric mean is over the
correct timed ones, with a bootstrap 95% interval over tasks.
"""
from __future__ import annotations

import math
import random
from collections import defaultdict

FAST_P = (0.0, 1.0, 1.5, 2.0)


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def aggregate(runs: list[dict], n_boot: int = 2000) -> list[dict]:
    by_label: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        by_label[r["label"]].append(r)
    rows = []
    for label, rs in sorted(by_label.items()):
        speedups = [r["speedup"] for r in rs if r["correct"] and r["speedup"]]
        correct = sum(bool(r["correct"]) for r in rs)
        row = {"label": label, "scored": len(rs), "correct_rate": correct / len(rs),
               "untimed": sum(1 for r in rs if r["correct"] and not r["speedup"])}
        for p in FAST_P:
            fast = correct if p == 0 else sum(1 for r in rs if r["correct"] and r["speedup"] and r["speedup"] > p)
            row[f"fast_{p:g}"] = fast / len(rs)
        if speedups:
            rng = random.Random(0)
            boots = sorted(_geomean(rng.choices(speedups, k=len(speedups))) for _ in range(n_boot))
            row.update(geomean_speedup=_geomean(speedups),
                       geomean_ci95=[boots[int(0.025 * n_boot)], boots[int(0.975 * n_boot) - 1]])
        else:
            row.update(geomean_speedup=None, geomean_ci95=None)
        rows.append(row)
    return rows
