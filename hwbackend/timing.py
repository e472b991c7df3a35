"""What the timing samples mean: speed-up with a bootstrap confidence interval and a noise margin.

Samples are per-call times of the timed batches (the worker's, checked against the scorer's clock by
clock_check.py), gathered over several launches of each job.
"""
from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

MIN_NOISE = 0.02  # a 2% floor: below it no run-to-run difference is trusted


def bootstrap_ratio(ref: list[float], cand: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of median(ref) / median(cand) by resampling both sample sets."""
    rng = random.Random(seed)
    return _middle_95(statistics.median(rng.choices(ref, k=len(ref))) / statistics.median(rng.choices(cand, k=len(cand)))
                      for _ in range(n))


def _middle_95(draws) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the bootstrap's draws."""
    ordered = sorted(draws)
    n = len(ordered)
    return ordered[int(0.025 * n)], ordered[int(0.975 * n) - 1]


def noise_margin(ref_by_launch: list[list[float]]) -> float:
    """Relative spread of one program against itself: between launches if there are several, else
    between the two halves of its samples. The verdict uses the larger of reference's and candidate's."""
    groups = [g for g in ref_by_launch if g]
    if len(groups) < 2:
        flat = groups[0] if groups else []
        groups = [flat[0::2], flat[1::2]] if len(flat) >= 2 else [flat]
    return _spread([statistics.median(g) for g in groups if g])


def _spread(meds: list[float]) -> float:
    """Range of the groups' medians over their median, at least MIN_NOISE (and MIN_NOISE for fewer than two)."""
    if len(meds) < 2:
        return MIN_NOISE
    return max(MIN_NOISE, (max(meds) - min(meds)) / statistics.median(meds))


def paired_ratios(ref_by_launch: list[list[float]], cand_by_launch: list[list[float]]) -> list[list[float]]:
    """Each launch's batch-by-batch speed-ups, where its two jobs took turns: batch b of the reference over batch b
    of the candidate, timed next to each other, so that a drift of the machine cancels in each."""
    return [[r / c for r, c in zip(rs, cs)] for rs, cs in zip(ref_by_launch, cand_by_launch)]


def ratio_spread(ratios_by_launch: list[list[float]]) -> float:
    """Relative spread of the launches' median speed-ups (`paired_ratios`): a drift shared by both jobs of a launch
    does not move it, what differs from one pair of processes to the next does. One launch: its two halves."""
    groups = [g for g in ratios_by_launch if g]
    if len(groups) == 1:
        flat = groups[0]
        groups = [flat[:len(flat) // 2], flat[len(flat) // 2:]] if len(flat) >= 2 else []
    return _spread([statistics.median(g) for g in groups])


def bootstrap_median(values: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of the median of `values` by resampling them."""
    rng = random.Random(seed)
    return _middle_95(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))


@dataclass
class Timing:
    """What the samples say: medians (ms), their ratio with its 95% interval, the noise margin, and whether
    the candidate is faster by more than the margin over the whole interval (clears_noise)."""
    speedup: float
    ci95: list[float]
    noise_margin: float
    reference_ms: float
    candidate_ms: float
    faster: bool


def summarize(ref_by_launch: list[list[float]], cand_by_launch: list[list[float]],
              clock_tolerance: float = 0.0, interleaved: bool = False) -> Timing:
    """`clock_tolerance`: the share of a batch a patched clock could hide from the scorer's cross-check
    (clock_check.py); the noise margin is never below it, so such a patch cannot make a candidate faster.
    `interleaved`: each launch's two jobs took turns batch by batch, so the speed-up and its interval are of the
    batch-by-batch ratios (`paired_ratios`) and the margin is the spread of the launches' speed-ups
    (`ratio_spread`), not of each program's own medians (which a drift of the machine moves, both alike)."""
    ref = [x for g in ref_by_launch for x in g]
    cand = [x for g in cand_by_launch for x in g]
    if interleaved:
        ratios = paired_ratios(ref_by_launch, cand_by_launch)
        flat = [x for g in ratios for x in g]
        speedup, (lo, hi), spread = statistics.median(flat), bootstrap_median(flat), ratio_spread(ratios)
    else:
        speedup, (lo, hi) = statistics.median(ref) / statistics.median(cand), bootstrap_ratio(ref, cand)
        spread = max(noise_margin(ref_by_launch), noise_margin(cand_by_launch))
    noise = max(spread, clock_tolerance)
    faster = clears_noise([lo, hi], noise)
    return Timing(speedup, [lo, hi], noise, statistics.median(ref) * 1e3, statistics.median(cand) * 1e3, faster)


def resolved(ci95: list[float | None] | None, noise: float | None) -> bool | None:
    """Whether the clock told the candidate from the reference: the whole interval beyond the noise margin, on
    the faster or the slower side. None where a score has no interval (untimed, or stored by an older pkb)."""
    if not _has_interval(ci95, noise):
        return None
    return clears_noise(ci95, noise) or ci95[1] < 1.0 / (1.0 + noise)


def beyond(speedup: float | None, ci95: list[float | None] | None, noise: float | None, p: float) -> bool:
    """Faster than p times the reference, as far as the clock can tell: the whole interval above p times
    (1 + the noise margin) where there is one, the speed-up alone for a score stored without it."""
    if not speedup:
        return False
    return ci95[0] > p * (1.0 + noise) if _has_interval(ci95, noise) else speedup > p


def _has_interval(ci95, noise) -> bool:
    return bool(ci95) and None not in ci95 and noise is not None


def clears_noise(ci95: list[float], noise: float) -> bool:
    """"faster" needs the whole 95% interval of the speed-up above 1 + the noise margin: a median ratio above
    the margin with an interval reaching below it is not enough (an exact copy of the reference on a loaded
    machine once had 3.45x with an interval of 1.06-5.45 and a margin of 2.39, and was called faster)."""
    return ci95[0] > 1.0 + noise
