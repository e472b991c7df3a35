"""What isolating candidates costs: `pkb screen` and `pkb run` wall time, this checkout against a baseline.

Three configurations, run interleaved (A, B, C, A, B, C, ...) so that the machine's load hits them alike:
the baseline checkout (`--baseline DIR`, e.g. a `git worktree` of the commit before isolation), this
checkout as it runs by default (candidate in a forked process, inside the bubblewrap sandbox) and this
checkout with `--no-sandbox` (the fork alone). Each `pkb screen` is a fresh command, as a user runs it;
`pkb run` screens the same files as one batch in a fresh store. With --default-batch, also `pkb run` on its
built-in default set (the known-good solutions and the broken candidates); with --score, `pkb score` of the
first file on gloo at 2 ranks. Prints median wall seconds and the ratios to the baseline; no asserts.
Usage: python benchmarks/isolation_cost.py --baseline DIR --task SLUG FILE... [--repeat 3] [--world-size 8]
       [--default-batch] [--score] [--no-fork-only]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = "import sys; from pkb.cli.main import main; sys.exit(main())"


def timed(root: str, argv: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=root)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", MAIN, *argv], env=env, capture_output=True, text=True, cwd=root)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"{root}: pkb {argv[0]} failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="a checkout of pkb before isolation")
    ap.add_argument("--task", required=True)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--world-size", type=int, default=8)
    ap.add_argument("--default-batch", action="store_true", help="also time `pkb run` on its built-in default")
    ap.add_argument("--score", action="store_true", help="also time `pkb score` of the first file (gloo, 2 ranks)")
    ap.add_argument("--no-fork-only", action="store_true", help="leave out the --no-sandbox configuration")
    args = ap.parse_args()
    configs = {"baseline": (args.baseline, []), "fork + sandbox": (HERE, [])}
    if not args.no_fork_only:
        configs["fork only"] = (HERE, ["--no-sandbox"])
    files = [os.path.abspath(f) for f in args.files]
    common = ["--task", args.task, "--world-size", str(args.world_size), "--seed", "1"]
    screen: dict = {name: [] for name in configs}
    batch: dict = {name: [] for name in configs}
    extra_rows: dict = {}   # (what, configuration) -> seconds
    for _ in range(args.repeat):
        for name, (root, extra) in configs.items():
            screen[name] += [timed(root, ["screen", *common, *extra, f]) for f in files]
            with tempfile.TemporaryDirectory() as d:
                run = ["run", "--tasks", args.task, "--world-size", str(args.world_size), "--seed", "1",
                       "--workers", "1", "--db", os.path.join(d, "r.sqlite"), *extra, *files]
                batch[name].append(timed(root, run))
                if args.default_batch:
                    extra_rows.setdefault(("pkb run (default set)", name), []).append(
                        timed(root, ["run", "--db", os.path.join(d, "default.sqlite"), *extra]))
            if args.score:
                score = ["score", files[0], "--task", args.task, "--backend", "gloo", "--nproc-per-node", "2", *extra]
                extra_rows.setdefault(("pkb score (gloo, 2 ranks)", name), []).append(timed(root, score))
    base_s, base_b = statistics.median(screen["baseline"]), statistics.median(batch["baseline"])
    print(f"{len(files)} files x {args.repeat} repeats, {args.world_size} ranks, load average {os.getloadavg()[0]:.1f}")
    print(f"{'configuration':16s} {'pkb screen (median s)':>22s} {'ratio':>6s} {'pkb run batch (median s)':>25s} "
          f"{'ratio':>6s}")
    for name in configs:
        s, b = statistics.median(screen[name]), statistics.median(batch[name])
        print(f"{name:16s} {s:22.2f} {s / base_s:6.2f} {b:25.2f} {b / base_b:6.2f}")
    for (what, name), secs in sorted(extra_rows.items()):
        base = statistics.median(extra_rows[(what, "baseline")])
        print(f"{what}: {name:16s} median {statistics.median(secs):7.2f} s, ratio {statistics.median(secs) / base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
