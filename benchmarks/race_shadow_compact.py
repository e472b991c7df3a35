"""Shadow memory and time of the race detector on gemini-3-pro CUDA 79's access pattern, a git revision's
detector against the working tree's, in one process. A figure, not an assert.

    .venv/bin/python benchmarks/race_shadow_compact.py [--before 8eccb81] [--ranks 8] [--mb 8] [--repeat 2]

Per rank, one buffer of MB MiB: its owner writes it whole (a host fill), every peer reads a tile of it (a pull
kernel: contiguous runs), then after a barrier the owner reads it as 79's blend kernel does, 192 of every 256
bf16 of a row in warp-sized groups of runs (access_runs), and writes a partial tile (the pages expand). Prints
the shadow's numpy bytes (per expanded page and per byte of buffer) and the seconds of each version.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pkbsim.device.ir import Event  # noqa: E402
from pkbsim.world.clocks import VectorClocks  # noqa: E402
from race_shadow_subword import Buf, barrier, load, shadow_bytes  # noqa: E402  (the sibling benchmark's tools)


def measure(mod, n: int, nbytes: int) -> tuple[tuple[int, int, int], float, int]:
    clocks = VectorClocks(n)
    det = mod.RaceDetector(clocks)
    bufs = [Buf() for _ in range(n)]
    races = 0
    t0 = time.perf_counter()
    for r in range(n):
        races += det.access(bufs[r], Event("put", r, "p.py:1", "host", r, 0, nbytes), True) is not None
    barrier(clocks, n)
    tile = nbytes // n
    for r in range(n):   # the pull kernel: rank r reads tile r of every peer, 128 KiB runs
        for q in range(n):
            if q != r:
                for lo in range(r * tile, (r + 1) * tile, 1 << 17):
                    ev = Event("get", r, "p.py:2", "pull", q, lo, min(lo + (1 << 17), (r + 1) * tile))
                    races += det.access(bufs[q], ev, False) is not None
    barrier(clocks, n)
    row, group = 512, 64 * 512   # 256 bf16 a row, 192 of them read; a warp group covers 64 rows
    for r in range(n):   # the blend: the owner reads 384 of every 512 bytes
        for lo in range(0, nbytes, group):
            runs = [(a, a + 384) for a in range(lo, min(lo + group, nbytes), row)]
            group_ev = mod.RunEvents("get", r, "p.py:3", "blend", r, runs, 0, 0)
            if not det.access_runs(bufs[r], group_ev, False):
                for k in range(len(runs)):
                    races += det.access(bufs[r], group_ev.event(k), False) is not None
        for lo in range(0, nbytes // 2, 4096):   # and writes part of it back (4 KiB of every 8 KiB)
            races += det.access(bufs[r], Event("put", r, "p.py:4", "blend", r, lo, lo + 2048), True) is not None
    return shadow_bytes(det), time.perf_counter() - t0, races


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="8eccb81", help="git revision of the detector to compare with")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb", type=float, default=8, help="buffer size per rank (MiB)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each version, alternating (the fastest is shown)")
    args = ap.parse_args()
    old = subprocess.run(["git", "-C", ROOT, "show", f"{args.before}:pkbsim/device/races.py"], check=True,
                         capture_output=True, text=True).stdout
    with open(os.path.join(ROOT, "pkbsim", "device", "races.py")) as f:
        new = f.read()
    versions = {f"before ({args.before})": load(old, "races_before"), "after (working tree)": load(new, "races_after")}
    nbytes = int(args.mb * 2**20) // 16384 * 16384
    print(f"{args.ranks} ranks, {nbytes / 2**20:.1f} MiB a rank; load {os.getloadavg()[0]:.1f}")
    got = {label: [] for label in versions}
    for _ in range(args.repeat):
        for label, mod in versions.items():
            got[label].append(measure(mod, args.ranks, nbytes))
    base = None
    for label, runs in got.items():
        (mem, pages, expanded), races = runs[0][0], runs[0][2]
        secs = min(x[1] for x in runs)
        base = base or (mem, secs)
        print(f"  {label:24s} shadow {mem / 2**20:8.1f} MiB, {mem / max(expanded, 1) / 1024:6.1f} KiB an expanded page "
              f"({expanded} of {pages}), {mem / (args.ranks * nbytes):5.2f} B a buffer byte (x{mem / base[0]:.2f}); "
              f"{secs:6.2f} s (x{secs / base[1]:.2f}); races {races}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
