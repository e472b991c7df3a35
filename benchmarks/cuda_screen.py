"""Time to screen an inline-CUDA one-shot all-reduce candidate on N simulated ranks at screen size.

The candidate (tests/cuda_candidates/one_shot_all_reduce.py) builds a load_inline extension whose kernel
barriers on the signal pads, sums every peer's buffer through peer pointers and barriers again; its
kernel runs on the PTX interpreter on every rank. With --cold the first screen builds everything in an
empty cache (the stand-in runtime and the extension: build included); the other runs hit the cache
(build excluded). Prints the verdict and times; no asserts.
Usage: python benchmarks/cuda_screen.py [--world-size N] [--repeat K] [--cold] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CANDIDATE = os.path.join(os.path.dirname(HERE), "tests", "cuda_candidates", "one_shot_all_reduce.py")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world-size", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="first run in an empty build cache (build included)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from pkbsim.ptx.compile import find_nvcc
    from pkbsim.screen.pipeline import ScreenOptions, screen
    from pkbsim.timing.topology import load_topology
    from tasks.registry import get as get_task

    if find_nvcc() is None:
        print("nvcc not found: inline CUDA cannot be built here", file=sys.stderr)
        return 2
    os.environ.pop("PKB_CANDIDATE_BUG", None)
    task = get_task("all_reduce")
    opts = ScreenOptions(world_size=args.world_size, topology=load_topology("hgx-h100"), cost=False)

    def one(label: str) -> dict:
        t0 = time.perf_counter()
        res = screen(task, CANDIDATE, opts)
        return {"run": label, "verdict": res.verdict, "stage": res.stage, "wall_s": round(time.perf_counter() - t0, 2),
                "functional_s": res.seconds.get("functional"), "reasons": [r.message for r in res.reasons]}

    runs = []
    if args.cold:
        saved = os.environ.get("PKB_CACHE_DIR")
        with tempfile.TemporaryDirectory(prefix="pkb-cold-cache-") as tmp:
            os.environ["PKB_CACHE_DIR"] = tmp
            try:
                runs.append(one("cold (build included)"))
            finally:
                if saved is None:
                    os.environ.pop("PKB_CACHE_DIR")
                else:
                    os.environ["PKB_CACHE_DIR"] = saved
    for _ in range(args.repeat):
        runs.append(one("warm (cached build)"))
    warm = [r["wall_s"] for r in runs if r["run"].startswith("warm")]
    summary = {"task": "all_reduce", "world_size": args.world_size, "size": task.sizes["screen"], "runs": runs,
               "best_warm_s": min(warm) if warm else None}
    if args.json:
        print(json.dumps(summary))
        return 0
    for r in runs:
        print(f"{r['run']:24s} screen: {r['verdict']}  total {r['wall_s']:.2f} s  (functional stage {r['functional_s']} s)"
              + (f"  reasons: {r['reasons']}" if r["reasons"] else ""))
    if warm:
        print(f"best: {min(warm):.2f} s to screen an inline-CUDA one-shot all-reduce on {args.world_size} ranks at "
              f"screen size, build excluded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
