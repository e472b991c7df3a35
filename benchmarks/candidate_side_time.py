"""The candidate's side of a screen's functional stage, in this process: seconds, CPU and what it reported.

    PYTHONPATH=CHECKOUT python benchmarks/candidate_side_time.py --pkb-root ROOT --task SLUG [--world-size 8]
        [--one-call] [--timeout S] FILE

Runs what a screen's candidate process runs (pkbsim.screen.candidate_side: the build, then the warm-up call and the
back-to-back calls at screen size, or with --one-call trial 0's call alone) without the sandbox, the reference's
runs or the cost stage, so that a change to the interpreter or the device observer can be timed on one file with
less noise than a whole screen, and under py-spy (`py-spy record -- python benchmarks/candidate_side_time.py ...`).
Prints the wall and CPU seconds (this process's, every thread), the peak resident memory, the load average, and a
digest of what the run reported (findings, reasons, limit, outputs), which must not change with a speed-up.
Numbers move with the machine's load; no asserts.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import time

# the code measured is the one on PYTHONPATH (a checkout, or a worktree of an earlier commit), not necessarily this one
sys.path.insert(0, os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pkb-root", required=True)
    ap.add_argument("--world-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--one-call", action="store_true", help="trial 0's call alone (as a fresh-process call)")
    ap.add_argument("--task", required=True, help="the task's slug (pkb screen --json names it)")
    ap.add_argument("file")
    args = ap.parse_args()

    from pkbsim.screen.candidate_side import CandidateJob, prepare, run_job
    from tasks.parallelkernelbench.naming import Checkout

    checkout = Checkout(os.path.realpath(args.pkb_root), "bfloat16")
    prepare(checkout)
    slug = args.task
    job = CandidateJob(slug, os.path.abspath(args.file), args.world_size, args.seed, args.timeout, 600.0, False,
                       checkout, fresh_trial=0 if args.one_call else -1)
    load0, t0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
    rep = run_job(job.to_json())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    found = [[f.kind, f.sites, f.message] for f in rep["findings"]]
    said = {"findings": found, "reasons": rep["reasons"], "limit": rep["limit"], "problems": rep["problems"],
            "not_simulated": rep["not_simulated"]}
    outs = hashlib.sha1(json.dumps(rep["outputs"], sort_keys=True, default=repr).encode()).hexdigest()[:10]
    print(json.dumps({"task": slug, "world_size": args.world_size, "calls": len(rep["outputs"]),
                      "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "seconds": rep["seconds"],
                      "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
                      "load": [round(load0, 1), round(os.getloadavg()[0], 1)],
                      "limit": (rep["limit"] or {}).get("kind"), "reasons": [r["kind"] for r in rep["reasons"]],
                      "report_digest": hashlib.sha1(json.dumps(said, sort_keys=True, default=repr).encode()).hexdigest()[:10],
                      "outputs_digest": outs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
