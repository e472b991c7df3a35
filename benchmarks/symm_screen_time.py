"""Time to screen symmetric-memory candidates at 8 ranks (issue 19's evidence 4: <= 10 s warm).

For each candidate: `pkb screen --world-size 8` as a fresh process (cold: torch import, start-up, the reference's
full-size shape run), then the same screen called twice in one process (warm: the second call, imports and
builds done). Prints seconds per stage; no asserts.
Usage: python benchmarks/symm_screen_time.py [--json OUT]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def candidates(tmp: str) -> list[tuple[str, str]]:
    spec = importlib.util.spec_from_file_location("triton_screen", os.path.join(ROOT, "benchmarks", "triton_screen.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    triton_path = os.path.join(tmp, "all_reduce__triton_one_shot.py")
    with open(triton_path, "w") as f:
        f.write(bench.CANDIDATE)
    return [("all_gather", os.path.join(ROOT, "tasks", "solutions", "all_gather.py")),
            ("all_reduce", os.path.join(ROOT, "tasks", "solutions", "all_reduce.py")),
            ("all_reduce", triton_path)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    args = ap.parse_args()
    from pkbsim.screen.pipeline import ScreenOptions, screen
    from pkbsim.timing.topology import load_topology
    from tasks.registry import get
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for task, path in candidates(tmp):
            t0 = time.perf_counter()
            subprocess.run([os.path.join(os.path.dirname(sys.executable), "pkb"), "screen", "--task", task, path,
                            "--world-size", "8", "--json"], capture_output=True, check=False)
            cold = time.perf_counter() - t0
            warm = []
            for _ in range(2):
                t0 = time.perf_counter()
                res = screen(get(task), path, ScreenOptions(8, load_topology("hgx-h100"), seed=1))
                warm.append(time.perf_counter() - t0)
            p = res.predicted
            rows.append({"task": task, "candidate": os.path.basename(path), "verdict": res.verdict.value,
                         "cold_s": round(cold, 2), "warm_s": round(warm[-1], 2), "first_in_process_s": round(warm[0], 2),
                         "stages_s": res.seconds, "speedup": p and round(p.speedup, 3),
                         "uncertain": p and p.uncertain})
            print(f"{task:12s} {os.path.basename(path):32s} {res.verdict.value:8s} cold {cold:5.1f} s  "
                  f"warm {warm[-1]:5.1f} s  stages {res.seconds}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": f"{os.cpu_count()} CPUs", "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
