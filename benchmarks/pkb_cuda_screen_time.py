"""Wall time of `pkb screen` on real inline-CUDA candidates of a ParallelKernelBench checkout, cold then warm.

Each file is screened twice through the command line, as a user runs it: first in a build cache that has
never seen that candidate's extension (cold: nvcc to PTX and the host build included), then again in the
same cache (warm: nothing to build). All files share one fresh cache, so the stand-in runtime is built once,
by the first file; its row says so. Prints one row per file and the medians; no asserts.
Usage: python benchmarks/pkb_cuda_screen_time.py --pkb-root PKB0 FILE... [--world-size 8] [--json]
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


def screen_once(pkb_root: str, path: str, world_size: int, cache: str) -> dict:
    """One `pkb screen --json --no-cost` run; its verdict, its stage times and the wall time around it."""
    env = dict(os.environ, PKB_CACHE_DIR=cache)
    cmd = [sys.executable, "-c", "from pkb.cli.main import main; raise SystemExit(main())", "screen",
           "--pkb-root", pkb_root, "--world-size", str(world_size), "--no-cost", "--json", path]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        res = json.loads(proc.stdout)
    except ValueError:
        res = {"verdict": f"no JSON (exit {proc.returncode})", "seconds": {}}
    return {"verdict": res.get("verdict"), "wall_s": round(wall, 1), "seconds": res.get("seconds", {})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pkb-root", required=True)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--world-size", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="pkb-cold-cache-") as cache:
        for i, path in enumerate(args.files):
            cold = screen_once(args.pkb_root, path, args.world_size, cache)
            warm = screen_once(args.pkb_root, path, args.world_size, cache)
            rows.append({"file": os.path.basename(path), "cold": cold, "warm": warm, "builds_runtime": i == 0})
            if not args.json:
                print(f"{rows[-1]['file']:55s} {cold['verdict']:12s} cold {cold['wall_s']:6.1f} s "
                      f"(build {cold['seconds'].get('build', 0):.1f})  warm {warm['wall_s']:6.1f} s"
                      + ("  [cold builds the stand-in runtime too]" if i == 0 else ""), flush=True)
    summary = {"world_size": args.world_size, "rows": rows,
               "median_cold_s": statistics.median(r["cold"]["wall_s"] for r in rows),
               "median_warm_s": statistics.median(r["warm"]["wall_s"] for r in rows),
               "load_after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"median over {len(rows)} files at {args.world_size} ranks: cold {summary['median_cold_s']:.1f} s, "
              f"warm {summary['median_warm_s']:.1f} s (load average at the end {summary['load_after']:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
