"""Wall time of `pkb screen` on real inline-CUDA candidates of a ParallelKernelBench checkout, cold then warm.

Each file is screened twice through the command line, as a user runs it: first in a build cache that has
never seen that candidate's extension (cold: nvcc to PTX and the host build included), then again in the
same cache (warm: nothing to build). All files share one fresh cache, so pkb's own builds (the stand-in
runtime, the precompiled header of host units) are made once, by the first file; its row says so and the
medians leave it out. With --before REV the same is done, file by file in turn, by the code of commit REV
(a git worktree), so that both columns come from one run on one machine. Prints one row per file and the
medians, the median seconds of each stage of the warm screens (the screen's own `seconds`: static, build,
functional, sizes, cost; the rest of the wall time is start-up and imports), files per hour at the warm and the
cold median, and the load average before and after; beside each wall time, the CPU seconds of the screen's
processes (the machine's load stretches the wall time far more than the CPU time); no asserts. Both codes are
byte-compiled first (`precompile`), as an installed pkb is and as the sandbox does: where the environment sets
PYTHONDONTWRITEBYTECODE, a code that ran a sandboxed screen once has .pyc files and a fresh worktree has none,
and compiling pkb's modules from source cost the uncompiled side 0.3-0.5 s of every screen.
Usage: python benchmarks/pkb_cuda_screen_time.py --pkb-root PKB0 FILE... [--world-size 8] [--before REV]
       [--no-sandbox] [--json] [--screen-arg=--sizes-budget=0 ...]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def screen_once(pkb_root: str, path: str, world_size: int, cache: str, code: str = ROOT, extra=()) -> dict:
    """One `pkb screen --json --no-cost` run by the code in folder `code`; its verdict, its stage times and the
    wall time around it."""
    env = dict(os.environ, PKB_CACHE_DIR=cache, PYTHONPATH=code)
    cmd = [sys.executable, "-c", "from pkb.cli.main import main; raise SystemExit(main())", "screen",
           "--pkb-root", pkb_root, "--world-size", str(world_size), "--no-cost", "--json", *extra, path]
    t0, cpu0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=code)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    try:
        res = json.loads(proc.stdout)
    except ValueError:
        res = {"verdict": f"no JSON (exit {proc.returncode})", "seconds": {}}
    return {"verdict": res.get("verdict"), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "seconds": res.get("seconds", {})}


def _children_cpu() -> float:
    """User and system seconds of the ended child processes and the descendants they waited for (the screen's
    zygote and candidate processes, nvcc, g++): less sensitive than the wall time to a shared machine's load."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pkb-root", required=True)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--world-size", type=int, default=8)
    ap.add_argument("--before", metavar="REV", help="also screen each file with the code of this commit")
    ap.add_argument("--no-sandbox", action="store_true", help="screen outside the sandbox (both codes)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--screen-arg", action="append", default=[], metavar="ARG",
                    help="passed on to every pkb screen (both codes), e.g. --screen-arg=--sizes-budget=0")
    args = ap.parse_args()
    # each code's screens run in its own folder: a relative path would name another file there (or none)
    args.files, args.pkb_root = [os.path.abspath(f) for f in args.files], os.path.abspath(args.pkb_root)
    extra = (["--no-sandbox"] if args.no_sandbox else []) + args.screen_arg
    load_before = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        codes = {"now": ROOT}
        if args.before:
            codes = {"before": stack.enter_context(_worktree(args.before)), **codes}
        for code in codes.values():
            precompile(code)
        caches = {k: stack.enter_context(tempfile.TemporaryDirectory(prefix=f"pkb-cold-cache-{k}-")) for k in codes}
        rows = []
        for i, path in enumerate(args.files):
            row = {"file": os.path.basename(path), "first": i == 0}
            for k, code in codes.items():
                row[k] = {w: screen_once(args.pkb_root, path, args.world_size, caches[k], code, extra)
                          for w in ("cold", "warm")}
            rows.append(row)
            if not args.json:
                print(f"{row['file'][:48]:48s}" + "".join(
                    f"  {k}: {r['cold']['verdict']:6s} cold {r['cold']['wall_s']:5.1f} s (build "
                    f"{r['cold']['seconds'].get('build', 0):4.1f}, cpu {r['cold']['cpu_s']:5.1f}) warm "
                    f"{r['warm']['wall_s']:4.1f} s (cpu {r['warm']['cpu_s']:4.1f})"
                    for k, r in ((k, row[k]) for k in codes)) + ("  [makes pkb's own builds]" if i == 0 else ""),
                    flush=True)
    later = [r for r in rows if not r["first"]] or rows
    summary = {"world_size": args.world_size, "rows": rows, "load_before": load_before,
               "load_after": os.getloadavg()[0],
               **{f"median_{k}_{w}_s": statistics.median(r[k][w]["wall_s"] for r in later)
                  for k in codes for w in ("cold", "warm")},
               **{f"median_{k}_{w}_cpu_s": statistics.median(r[k][w]["cpu_s"] for r in later)
                  for k in codes for w in ("cold", "warm")}}
    for k in codes:
        warm = [r[k]["warm"] for r in later]
        stages = sorted({st for w in warm for st in w["seconds"]})
        summary[f"warm_stages_{k}_s"] = {st: round(statistics.median(w["seconds"].get(st, 0.0) for w in warm), 2)
                                         for st in stages}
        summary[f"warm_stages_{k}_s"]["rest"] = round(statistics.median(
            w["wall_s"] - sum(w["seconds"].values()) for w in warm), 2)
        for w in ("cold", "warm"):
            summary[f"files_per_hour_{k}_{w}"] = round(3600 / max(summary[f"median_{k}_{w}_s"], 1e-9))
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"medians over {len(later)} files (the first left out) at {args.world_size} ranks: " + "; ".join(
            f"{k}: cold {summary[f'median_{k}_cold_s']:.1f} s (cpu {summary[f'median_{k}_cold_cpu_s']:.1f}), warm "
            f"{summary[f'median_{k}_warm_s']:.1f} s (cpu {summary[f'median_{k}_warm_cpu_s']:.1f})" for k in codes) + f" (load average {summary['load_before']:.1f} before, {summary['load_after']:.1f} at "
                              "the end)")
        for k in codes:
            print(f"  {k}: warm median by stage (s): " + ", ".join(
                f"{st} {v:.1f}" for st, v in summary[f"warm_stages_{k}_s"].items()) +
                  f"; files/hour at the medians: warm {summary[f'files_per_hour_{k}_warm']}, "
                  f"cold {summary[f'files_per_hour_{k}_cold']}")
    return 0


def precompile(code: str) -> None:
    """Byte-compile the packages of the code in folder `code` (what candidate_sandbox.precompile does)."""
    import compileall

    for package in ("candidate_sandbox", "pkb", "pkbsim", "hwbackend", "tasks"):
        if os.path.isdir(os.path.join(code, package)):
            compileall.compile_dir(os.path.join(code, package), quiet=2, workers=1)


@contextlib.contextmanager
def _worktree(rev: str):
    """A checkout of commit `rev` in a temporary folder, removed afterwards."""
    folder = tempfile.mkdtemp(prefix="pkb-before-")
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-f", folder, rev], check=True,
                   capture_output=True)
    try:
        yield folder
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", folder], check=False, capture_output=True)


if __name__ == "__main__":
    raise SystemExit(main())
