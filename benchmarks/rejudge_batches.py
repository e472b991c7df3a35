"""A stored score's batches judged again under the current rule: the speed-up, interval, noise margin and verdict
that `pkb score --json` files would get from the same timed batches (their `clock_check.batches`) with the
clock check and statistics of this checkout. For a rule change measured on batches already taken, not a score.
Usage: python benchmarks/rejudge_batches.py SCORE.json [...]
"""
from __future__ import annotations

import json
import sys

from hwbackend.clock_check import BatchClock, cross_check
from hwbackend.timing import summarize


def rejudge(doc: dict) -> str:
    rows = doc["clock_check"]["batches"]
    launches = sorted({r["launch"] for r in rows})

    def of(launch: int, role: str) -> list[dict]:
        return [r for r in rows if r["launch"] == launch and r["role"] == role]

    def clocks(rs: list[dict]) -> list[BatchClock]:
        return [BatchClock(r["wall_ms"] / 1e3, r["reported_ms"] / 1e3, r["calls"]) for r in rs]

    checks = [cross_check(clocks(of(l, "reference")), clocks(of(l, "candidate")), "nccl") for l in launches]
    per_call = [[[r["reported_ms"] / 1e3 / r["calls"] for r in of(l, role)] for l in launches]
                for role in ("reference", "candidate")]
    t = summarize(*per_call, max(c.tolerance for c in checks))
    verdict = "faster" if t.faster else "slower"
    found = sum(len(c.findings) for c in checks)
    return (f"{t.speedup:.4f}x CI {t.ci95[0]:.4f}-{t.ci95[1]:.4f} margin {t.noise_margin:.2%} {verdict}"
            f" over {len(launches)} launches, {found} clock finding(s) (stored: {doc['status']} {doc['speedup']:.4f}x"
            f" margin {doc['noise_margin']:.2%})")


def main() -> int:
    for path in sys.argv[1:]:
        with open(path) as f:
            print(f"{path}: {rejudge(json.load(f))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
