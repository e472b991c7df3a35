"""Where the seconds of a cold inline-CUDA build go: each compiler and linker run of a candidate's extension build.

Imports each ParallelKernelBench candidate once outside any world, as the screen's prebuild does
(pkbsim/screen/prebuild.py), and where that builds nothing (the build is in its first call) runs one call at 2
ranks (its time is in the total, not in a phase), with every subprocess the build starts timed (wall seconds from start to exit): the
kernel unit (nvcc), the host unit (g++ with the precompiled prelude), a whole unit (nvcc) where the split does not
apply, the link probe for undefined symbols, the stubs, the link, c++filt. With --nvcc-time, nvcc's own phases
(`nvcc -time`: cicc, ptxas, the host compiler, fatbinary) are added for each nvcc run. All files share one fresh
cache: pkb's own builds (stand-in runtime, precompiled header) are made first and reported apart, so each
candidate's build is cold. Prints one row per file, the median of each phase and the load average; no asserts.
Usage: python benchmarks/cuda_build_phases.py --pkb-root PKB0 FILE... [--nvcc-time] [--json]
"""
from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_runs: list[tuple[str, float, list[str]]] = []   # (phase, seconds, nvcc -time rows)
_nvcc_time = False
_waiters: list[threading.Thread] = []


def _settled() -> list:
    """The runs so far, once every started process's waiter has recorded it."""
    while _waiters:
        _waiters.pop().join()
    return list(_runs)


def _phase(cmd: list[str]) -> str:
    tool = os.path.basename(str(cmd[0]))
    text = " ".join(map(str, cmd))
    if tool == "nvcc":
        if "-cubin" in cmd:
            return "compile check (nvcc -cubin)"
        return "kernel unit (nvcc)" if "_kernels.cu" in text else "whole unit (nvcc)"
    if tool in ("g++", "gcc"):
        if "-shared" in cmd:
            return "link probe (g++)" if "-Wl,--no-undefined" in cmd else "link (g++)"
        if "autostub" in text:
            return "stubs (gcc)"
        if "_host.cpp" in text:
            return "host unit (g++)"
        return f"{tool} other"
    return tool


def _timed(real_popen):
    class Popen(real_popen):
        """Timed from its start to its exit (a thread waits for it: the build may wait for it later, after
        another compiler it ran at the same time)."""

        def __init__(self, args, *a, **kw):
            cmd = list(args) if isinstance(args, (list, tuple)) else [args]
            phase, t0, timing = _phase(cmd), time.perf_counter(), None
            if _nvcc_time and os.path.basename(str(cmd[0])) == "nvcc":
                fd, timing = tempfile.mkstemp(suffix=".csv")
                os.close(fd)
                os.remove(timing)
                args = [*cmd, "-time", timing]
            super().__init__(args, *a, **kw)

            def waiter():
                real_popen.wait(self)
                rows = []
                if timing and os.path.exists(timing):
                    with open(timing) as f:
                        rows = list(csv.reader(f))
                    os.remove(timing)
                _runs.append((phase, time.perf_counter() - t0, rows))
            _waiters.append(threading.Thread(target=waiter, daemon=True))
            _waiters[-1].start()
    return Popen


def _nvcc_phases(rows: list[list[str]]) -> dict[str, float]:
    """nvcc -time's CSV (source file, phase name, ..., metric, unit) summed by phase name, in seconds."""
    out: dict[str, float] = collections.defaultdict(float)
    for row in rows:
        if len(row) >= 3 and row[-1].strip() == "ms":
            try:
                ms = float(row[-2])
            except ValueError:
                continue
            out[row[1].strip()] += ms / 1000
    return dict(out)


def build_once(path: str, task) -> tuple[float, list]:
    from pkbsim.screen.candidate import Session, loader
    from pkbsim.screen.candidate_side import extension_stand_in
    from pkbsim.taskrun import Call, run_calls
    reference = task.reference
    del _runs[:]
    t0 = time.perf_counter()
    session = Session(path)
    try:
        with extension_stand_in(session):
            load = loader(session, reference)
            load()   # a candidate that builds at import (load_inline at module level)
            if not _settled():   # one that builds on its first call (a helper's compile_cuda_extension): one call, 2 ranks
                run_calls(task, [Call(0, load=load, poison=True)], 2, seed=0, timeout=600, keep_inputs=False,
                          shape_run=False)
    except BaseException as e:  # noqa: BLE001 - a compile error is a build too
        print(f"  ({os.path.basename(path)}: {type(e).__name__}: {str(e)[:120]})", file=sys.stderr)
    return time.perf_counter() - t0, _settled()


def main() -> int:
    global _nvcc_time
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pkb-root", required=True)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--nvcc-time", action="store_true", help="add nvcc's own phases (nvcc -time)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    _nvcc_time = args.nvcc_time
    os.environ.setdefault("PKB_CACHE_DIR", tempfile.mkdtemp(prefix="pkb-build-phases-"))
    subprocess.Popen = _timed(subprocess.Popen)
    from pkbsim.screen.parallelkernelbench import register_parallelkernelbench_tasks
    from pkbsim.screen.pipeline import build_runtime
    from tasks.parallelkernelbench.naming import parallelkernelbench_task_for
    from tasks.registry import get

    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    build_runtime()
    own = time.perf_counter() - t0
    ids = register_parallelkernelbench_tasks(args.pkb_root)
    rows = []
    for path in args.files:
        slug = parallelkernelbench_task_for(path, ids)
        total, runs = build_once(path, get(slug))
        phases: dict[str, float] = collections.defaultdict(float)
        nvcc: dict[str, float] = collections.defaultdict(float)
        for phase, s, rows_ in runs:
            phases[phase] += s
            for k, v in _nvcc_phases(rows_).items():
                nvcc[f"{phase}: {k}"] += v
        rows.append({"file": os.path.basename(path), "total_s": round(total, 2),
                     "phases_s": {k: round(v, 2) for k, v in phases.items()},
                     "nvcc_phases_s": {k: round(v, 2) for k, v in nvcc.items()}})
        if not args.json:
            print(f"{rows[-1]['file'][:44]:44s} total {total:5.1f} s: " + ", ".join(
                f"{k} {v:.1f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])), flush=True)
            if nvcc:
                print("    nvcc -time: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(nvcc.items(), key=lambda kv: -kv[1])
                                                  if v >= 0.05), flush=True)
    names = sorted({k for r in rows for k in r["phases_s"]})
    summary = {"pkb_own_builds_s": round(own, 1), "rows": rows, "load_before": load_before,
               "load_after": os.getloadavg()[0], "median_total_s": statistics.median(r["total_s"] for r in rows),
               "median_phase_s": {k: statistics.median(r["phases_s"].get(k, 0.0) for r in rows) for k in names}}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"pkb's own builds {own:.1f} s; median build {summary['median_total_s']:.1f} s over {len(rows)} files; "
              "median by phase (s, 0 where a file has none): " + ", ".join(
                  f"{k} {v:.1f}" for k, v in summary["median_phase_s"].items())
              + f" (load average {load_before:.1f} before, {summary['load_after']:.1f} after)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
