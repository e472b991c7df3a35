"""How often the scorer's rule calls a candidate "faster": for identical code (the false-positive rate) and for
code 2%, 3% and 5% faster, on simulated batch times with the noise a GPU shows.

Each simulated score has the default protocol's shape (2 launches of each side, 8 timed batches a launch,
and, where that says faster, 2 launches more, judged on all 4: `Protocol.confirm`):
a batch's time per call is 20 us x (1 + a launch's offset) x (1 + the batch's own noise), both normal with
the coefficients of variation given, and the candidate's scaled by 1 / speed-up. `hwbackend.timing.summarize`
decides, with the clock check's tolerance as the floor of the noise margin, as `pkb score` does. Prints one
line per (launch noise, speed-up) pair: the share called faster after 2 launches and after the confirmation.
With --drift, the host-bound noise the GPU machines showed instead (benchmarks/host_bound_noise.py): the
machine's speed drifts (a level per stretch of time, normal with --drift's coefficient of variation) and
a share of batches (--spikes) is slowed by 30-200%; each score is judged as it runs one job after the other
(each job's batches in a stretch of their own) and as it runs them taking turns (both jobs' batches of a launch
in one stretch, hwbackend.timing.summarize with interleaved=True).
No asserts: a measurement of the rule.
Usage: python benchmarks/decision_rule_rates.py [--scores 400] [--batch-cv 0.01] [--tolerance 0.01]
       [--drift 0.1 --spikes 0.25]
"""
from __future__ import annotations

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hwbackend.timing import summarize  # noqa: E402

LAUNCHES, BATCHES, CALL_S = 4, 8, 20e-6  # 2, and 2 more to confirm


def launches(rng: random.Random, speedup: float, launch_cv: float, batch_cv: float) -> list[list[float]]:
    return [[CALL_S / speedup * (1 + offset) * (1 + rng.gauss(0, batch_cv)) for _ in range(BATCHES)]
            for offset in (rng.gauss(0, launch_cv) for _ in range(LAUNCHES))]


def drifting(rng: random.Random, speedup: float, level: float, launch_cv: float, batch_cv: float,
             spikes: float) -> list[float]:
    """One job's batches in one launch: the stretch's level, the process's own offset, batch noise, spikes."""
    offset = 1 + rng.gauss(0, launch_cv)
    return [CALL_S / speedup * level * offset * (1 + rng.gauss(0, batch_cv))
            * (1 + rng.uniform(0.3, 2.0) if rng.random() < spikes else 1) for _ in range(BATCHES)]


def drift_rates(args, rng: random.Random) -> None:
    print(f"drift {args.drift:.0%} a stretch, spikes in {args.spikes:.0%} of batches, batch noise {args.batch_cv:.1%}, "
          f"clock tolerance {args.tolerance:.1%}; {args.scores} simulated scores per line")
    for launch_cv in (0.0, 0.01, 0.02):
        for speedup in (1.0, 1.03, 1.05):
            calls = {"one after the other": [0, 0], "taking turns": [0, 0]}
            for _ in range(args.scores):
                for way, interleaved in (("one after the other", False), ("taking turns", True)):
                    ref, cand = [], []
                    for _ in range(LAUNCHES):
                        level = 1 + abs(rng.gauss(0, args.drift))
                        ref.append(drifting(rng, 1.0, level, launch_cv, args.batch_cv, args.spikes))
                        level = level if interleaved else 1 + abs(rng.gauss(0, args.drift))
                        cand.append(drifting(rng, speedup, level, launch_cv, args.batch_cv, args.spikes))
                    two = summarize(ref[:2], cand[:2], args.tolerance, interleaved).faster
                    calls[way][0] += two
                    calls[way][1] += two and summarize(ref, cand, args.tolerance, interleaved).faster
            print(f"launch noise {launch_cv:5.1%}  true speed-up {speedup:.2f}: " + "; ".join(
                f"{way}: faster {n[0] / args.scores:6.1%} after 2 launches, {n[1] / args.scores:6.1%} confirmed"
                for way, n in calls.items()), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scores", type=int, default=400)
    ap.add_argument("--batch-cv", type=float, default=0.01)
    ap.add_argument("--tolerance", type=float, default=0.01, help="the clock check's share of a batch")
    ap.add_argument("--drift", type=float, default=0.0, help="the host-bound model: the machine's drift")
    ap.add_argument("--spikes", type=float, default=0.25, help="the host-bound model: share of slowed batches")
    args = ap.parse_args()
    rng = random.Random(1)
    if args.drift:
        drift_rates(args, rng)
        return 0
    print(f"{args.scores} simulated scores per line; batch noise {args.batch_cv:.1%}, clock tolerance "
          f"{args.tolerance:.1%}")
    for launch_cv in (0.0, 0.005, 0.01, 0.02):
        for speedup in (1.0, 1.02, 1.03, 1.05):
            first = confirmed = 0
            for _ in range(args.scores):
                ref = launches(rng, 1.0, launch_cv, args.batch_cv)
                cand = launches(rng, speedup, launch_cv, args.batch_cv)
                two = summarize(ref[:2], cand[:2], args.tolerance).faster
                first += two
                confirmed += two and summarize(ref, cand, args.tolerance).faster
            print(f"launch noise {launch_cv:5.1%}  true speed-up {speedup:.2f}: called faster in "
                  f"{first / args.scores:6.1%} after 2 launches, {confirmed / args.scores:6.1%} confirmed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
