"""How far past the sandbox's caps a hostile process gets before the supervisor kills it.

Runs a fork bomb (8 nested forks, 256 processes, all waiting; --depth) inside the bare sandbox under a cap on
processes and threads, and a memory hog (allocates and touches 64 MiB at a time) under a cap on resident
memory, several times each, and prints what the supervisor's line counted at the kill: processes and
threads against the cap (and how many processes the bomb started in all, each writing a byte), resident
memory against the cap. A ratio, not an assert.

    python benchmarks/sandbox_caps.py [--runs 10] [--caps 32,64] [--memory-mib 512] [--baseline REV]

--baseline REV: the fork bomb also under the supervisor of git revision REV (one that took two caps:
MAX_TASKS CPU_SECONDS), alternating run by run with this tree's, so both see the same load; REV may also be
the path of that supervisor.py (where there is no git, e.g. on a lent GPU machine). PKB_SANDBOX_NO_PID_MAX=1:
this tree's supervisor without the kernel's pid_max (its count and tripwire alone, as for a user other
than root on older kernels).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import candidate_sandbox as sandbox

# every process it starts writes one byte to stdout: how many ever ran, whatever the supervisor counted
BOMB = "import os, time\nfor _ in range({depth}):\n    if os.fork() == 0:\n        os.write(1, b'x')\ntime.sleep(30)\n"
HOG = ("import time\nkeep = []\nwhile True:\n    b = bytearray(64 << 20)\n"
       "    for i in range(0, len(b), 4096):\n        b[i] = 1\n    keep.append(b)\n")


def run(limits: sandbox.Limits, code: str, old: str | None = None) -> tuple[str, int]:
    """The supervisor's line, and how many processes ran (the bomb's bytes on stdout, and its first).
    `old`: the path of an older supervisor (two caps) to run instead of this tree's."""
    before = os.environ.get(sandbox.NO_PID_MAX)
    if old:  # an older supervisor cannot drop the capabilities that pid_max needs
        os.environ[sandbox.NO_PID_MAX] = "1"
    cmd = [*sandbox.prefix(readable=[os.path.dirname(old)] if old else [], limits=limits), sys.executable, "-c", code]
    if before is None:
        os.environ.pop(sandbox.NO_PID_MAX, None)
    if old:
        at = cmd.index(sandbox.SUPERVISOR)
        cmd[at:cmd.index("--", at) + 1] = [old, *cmd[at + 1:at + 3], "--"]  # its path, MAX_TASKS CPU_SECONDS
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    line = sandbox.breach(proc.stderr) or f"no breach (exit {proc.returncode}): {proc.stderr[-200:]}"
    return line, 1 + proc.stdout.count("x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--caps", default="32,64")
    ap.add_argument("--depth", type=int, default=8, help="the bomb forks this many times over (2**depth processes)")
    ap.add_argument("--memory-mib", type=int, default=0, help="also the memory hog under this cap (0: not)")
    ap.add_argument("--baseline", help="a git revision whose supervisor runs the bomb too, alternating")
    args = ap.parse_args()
    old = None
    if args.baseline and os.path.isfile(args.baseline):
        old = os.path.abspath(args.baseline)
    elif args.baseline:
        folder = tempfile.mkdtemp(prefix="pkb-old-supervisor-", dir=os.getcwd())
        old = os.path.join(folder, "supervisor.py")
        with open(old, "w") as f:
            f.write(subprocess.check_output(["git", "show", f"{args.baseline}:candidate_sandbox/supervisor.py"],
                                            text=True))
    for cap in [int(c) for c in args.caps.split(",")]:
        seen: dict[str, list[int]] = {"this tree": [], args.baseline: []}
        ran: dict[str, list[int]] = {"this tree": [], args.baseline: []}
        for _ in range(args.runs):
            for name, path in [("this tree", None)] + ([(args.baseline, old)] if old else []):
                line, n = run(sandbox.Limits(max_tasks=cap), BOMB.format(depth=args.depth), path)
                m = re.search(r"with (\d+) threads", line)
                seen[name].append(int(m.group(1)) if m else -1)
                ran[name].append(n)
        for name in [n for n in seen if seen[n]]:
            r = ran[name]
            print(f"fork bomb, cap {cap}, {name}: the supervisor counted {sorted(seen[name])}; processes that ran "
                  f"{sorted(r)}: median {statistics.median(r):g} ({statistics.median(r) / cap:.2f}x the cap), "
                  f"max {max(r)}")
    if old and not os.path.isfile(args.baseline):
        os.remove(old)
        os.rmdir(os.path.dirname(old))
    if args.memory_mib:
        for _ in range(min(args.runs, 5)):
            print(run(sandbox.Limits(memory_bytes=args.memory_mib << 20), HOG)[0])


if __name__ == "__main__":
    main()
