"""Aggregates of many scored candidates: correctness rate, fast_p and geometric-mean speed-up.

fast_p (KernelBench's metric): the fraction of all scored (task, candidate) pairs that are correct AND
faster than p times the reference; failures stay in the denominator (fast_0 is the correctness rate: a
correctness-only score counts there, untimed, and as not faster for p > 0). "Faster than p" is what the
clock resolved: the whole 95% interval above p times (1 + the score's noise margin), so a speed-up the clock
cannot tell from noise is never counted, however high its median; such scores are counted apart
(`unresolved`). The geometric mean is over the correct timed ones, with a bootstrap 95% interval over tasks.
"""
from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass

from hwbackend.result import RunRecord
from hwbackend.timing import beyond

FAST_P = (0.0, 1.0, 1.5, 2.0)


@dataclass
class LeaderboardRow:
    """One candidate group's aggregates (`pkb leaderboard`)."""
    label: str
    scored: int                                # (task, candidate) pairs, failures included
    correct_rate: float
    untimed: int                               # correct, scored without timing
    fast: dict[float, float]                   # p -> fast_p, for each p of FAST_P
    unresolved: int = 0                        # correct timed scores the clock could not tell from the reference
    geomean_speedup: float | None = None       # over the correct timed ones; None where there are none
    geomean_ci95: list[float] | None = None    # bootstrap over them

    def to_json(self) -> dict:
        return {"label": self.label, "scored": self.scored, "correct_rate": self.correct_rate,
                "untimed": self.untimed, **{f"fast_{p:g}": v for p, v in self.fast.items()},
                "unresolved": self.unresolved,
                "geomean_speedup": self.geomean_speedup, "geomean_ci95": self.geomean_ci95}


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def aggregate(runs: list[RunRecord], n_boot: int = 2000) -> list[LeaderboardRow]:
    """One row per label, in the labels' order."""
    by_label: dict[str, list[RunRecord]] = defaultdict(list)
    for r in runs:
        by_label[r.label].append(r)
    rows = []
    for label, rs in sorted(by_label.items()):
        speedups = [r.speedup for r in rs if r.correct and r.speedup]
        correct = sum(bool(r.correct) for r in rs)
        fast = {p: (correct if p == 0 else
                    sum(1 for r in rs if r.correct and beyond(r.speedup, [r.ci_lo, r.ci_hi], r.noise_margin, p)))
                / len(rs) for p in FAST_P}
        row = LeaderboardRow(label, len(rs), correct / len(rs), sum(1 for r in rs if r.untimed), fast,
                             sum(1 for r in rs if r.correct and r.resolved is False))
        if speedups:
            rng = random.Random(0)
            boots = sorted(_geomean(rng.choices(speedups, k=len(speedups))) for _ in range(n_boot))
            row.geomean_speedup = _geomean(speedups)
            row.geomean_ci95 = [boots[int(0.025 * n_boot)], boots[int(0.975 * n_boot) - 1]]
        rows.append(row)
    return rows
