"""The resident memory an honest command's sandboxes hold, as the sandbox's supervisor counts it: runs a pkb
command (e.g. `score ...`) and samples, every 50 ms, the processes of every bubblewrap sandbox below it:
the sum of RssAnon + RssShmem (the supervisor's upper bound) and, each second, of Pss_Anon + Pss_Shmem (its
exact figure), and prints the peaks and the command's exit code. To choose a cap that honest jobs stay
well under; a figure, not an assert. (The private tmpfs mounts are not seen from here: add them.)

    python benchmarks/sandbox_memory_peak.py score --task all_reduce CANDIDATE --nproc-per-node 1 ...
"""
from __future__ import annotations

import os
import subprocess
import sys
import time


def _table() -> dict[int, tuple[int, str]]:
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    head, rest = f.read().rsplit(")", 1)
                table[int(entry)] = (int(rest.split()[1]), head.split("(", 1)[1])
            except (OSError, IndexError, ValueError):
                continue
    return table


def sandboxed(root: int) -> list[int]:
    """The processes inside bwrap sandboxes that descend from `root` (bwrap's own excluded)."""
    table, found = _table(), []
    for pid in table:
        chain, p = [], pid
        while p in table and p != root and p > 1:
            chain.append(table[p][1])
            p = table[p][0]
        if p == root and "bwrap" in chain[1:]:
            found.append(pid)
    return found


def kib(pid: int, name: str, keys: tuple[str, ...]) -> int:
    try:
        with open(f"/proc/{pid}/{name}") as f:
            return sum(int(line.split()[1]) for line in f if line.startswith(keys)) * 1024
    except (OSError, ValueError):
        return 0


def main() -> int:
    proc = subprocess.Popen([sys.executable, "-m", "pkb.cli.main", *sys.argv[1:]], stdout=subprocess.DEVNULL)
    peak_bound = peak_exact = procs = 0
    last_exact = 0.0
    while proc.poll() is None:
        pids = sandboxed(proc.pid)
        bound = sum(kib(p, "status", ("RssAnon:", "RssShmem:")) for p in pids)
        if bound > peak_bound:
            peak_bound, procs = bound, len(pids)
        if time.monotonic() - last_exact > 1.0:
            last_exact = time.monotonic()
            peak_exact = max(peak_exact, sum(kib(p, "smaps_rollup", ("Pss_Anon:", "Pss_Shmem:")) for p in pids))
        time.sleep(0.05)
    print(f"pkb {' '.join(sys.argv[1:])}: exit {proc.returncode}; peak resident memory of its sandboxes: "
          f"{peak_bound / 2**30:.2f} GiB by RssAnon+RssShmem ({procs} processes), "
          f"{peak_exact / 2**30:.2f} GiB by Pss_Anon+Pss_Shmem (sampled each second)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
