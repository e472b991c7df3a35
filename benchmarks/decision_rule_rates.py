"""How often the scorer's rule calls a candidate "faster": for identical code (the false-positive rate) and for
code 2%, 3% and 5% faster, on simulated batch times with the noise a GPU shows.

Each simulated score has the default protocol's shape (2 launches of each side, 8 timed batches a launch,
and, where that says faster, 2 launches more, judged on all 4: `Protocol.confirm`):
a batch's time per call is 20 us x (1 + a launch's offset) x (1 + the batch's own noise), both normal with
the coefficients of variation given, and the candidate's scaled by 1 / speed-up. `hwbackend.timing.summarize`
decides, with the clock check's tolerance as the floor of the noise margin, as `pkb score` does. Prints one
line per (launch noise, speed-up) pair: the share called faster after 2 launches and after the confirmation.
No asserts: a measurement of the rule.
Usage: python benchmarks/decision_rule_rates.py [--scores 400] [--batch-cv 0.01] [--tolerance 0.01]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scores", type=int, default=400)
    ap.add_argument("--batch-cv", type=float, default=0.01)
    ap.add_argument("--tolerance", type=float, default=0.01, help="the clock check's share of a batch")
    args = ap.parse_args()
    rng = random.Random(1)
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
