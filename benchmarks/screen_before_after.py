"""`pkb screen --json` of files by two code versions, alternating, warm: same verdict and findings? how much faster?

    python benchmarks/screen_before_after.py --before REV --pkb-root PKB0 [--world-size 8] [--rounds 1]
        [--screen-arg=--no-sandbox ...] FILE...

For each file and round, screens it with the code of commit REV (a git worktree) and with this checkout, in turn
(the order flips each round), in the default build cache (a first, unmeasured screen by each code builds what is
missing). Prints per screen the verdict, a digest of its reasons, warnings and findings (kind, sites, message),
the wall and CPU seconds of the screen's processes and the load average, then per file whether both codes agree
and the ratios of the medians (before / after). Numbers move with the machine's load (CPU seconds far less than wall); no asserts.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from pkb_cuda_screen_time import _children_cpu, _worktree  # noqa: E402


def screen(code: str, pkb_root: str, path: str, world_size: int, extra: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=code)
    cmd = [sys.executable, "-c", "from pkb.cli.main import main; raise SystemExit(main())", "screen", "--pkb-root",
           pkb_root, "--world-size", str(world_size), "--json", *extra, path]
    load0, t0, cpu0 = os.getloadavg()[0], time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=code)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    try:
        res = json.loads(proc.stdout)
    except ValueError:
        res = {"verdict": f"no JSON (exit {proc.returncode})"}
    reasons = [[r.get("kind"), r.get("site"), r.get("message")] for key in ("reasons", "warnings")
               for r in res.get(key, [])]
    reasons += [[f.get("kind"), f.get("sites"), f.get("message")] for f in res.get("findings", [])]
    return {"verdict": res.get("verdict"), "reasons": reasons,
            "digest": hashlib.sha1(json.dumps(reasons, sort_keys=True).encode()).hexdigest()[:10],
            "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load": [round(load0, 1), round(os.getloadavg()[0], 1)],
            "seconds": res.get("seconds", {})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, metavar="REV")
    ap.add_argument("--pkb-root", required=True)
    ap.add_argument("--world-size", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--screen-arg", action="append", default=[], metavar="ARG")
    ap.add_argument("--no-warm-up", action="store_true", help="skip the unmeasured first screens")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    pkb_root = os.path.realpath(args.pkb_root)  # the sandbox binds real paths, not links
    with _worktree(args.before) as before:
        codes = {"before": before, "after": ROOT}
        for path in args.files:
            path = os.path.realpath(path)
            name = os.path.basename(path)
            if not args.no_warm_up:
                for code in codes.values():
                    screen(code, pkb_root, path, args.world_size, args.screen_arg + ["--no-cost"])
            runs: dict = {"before": [], "after": []}
            for rnd in range(args.rounds):
                for k in (["before", "after"] if rnd % 2 == 0 else ["after", "before"]):
                    r = screen(codes[k], pkb_root, path, args.world_size, args.screen_arg)
                    runs[k].append(r)
                    print(json.dumps({"file": name, "code": k, **{x: r[x] for x in r if x != "reasons"}}), flush=True)
                    print("   ", json.dumps(r["reasons"])[:600], flush=True)
            same = {(r["verdict"], r["digest"]) for rs in runs.values() for r in rs}
            med = {k: (statistics.median(r["wall_s"] for r in rs), statistics.median(r["cpu_s"] for r in rs))
                   for k, rs in runs.items()}
            print(f"{name}: {'same verdict and reasons' if len(same) == 1 else 'DIFFERENT: ' + str(same)}; "
                  f"wall {med['before'][0]:.1f} -> {med['after'][0]:.1f} s ({med['before'][0] / med['after'][0]:.2f}x), "
                  f"CPU {med['before'][1]:.1f} -> {med['after'][1]:.1f} s ({med['before'][1] / med['after'][1]:.2f}x)",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
