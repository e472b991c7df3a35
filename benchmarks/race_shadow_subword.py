"""Shadow memory and time of the race detector (pkbsim/device/races.py) on synthetic access patterns, three
versions in one run: BEFORE (4-byte cells, a git revision: adjacent bf16 stores of two ranks are a false
write-write race), BEFORE with 2-byte cells (the earlier fix, twice the shadow state) and the working tree
(4-byte cells, words split into halves or bytes only where an access covers part of one). A figure, not an
assert: prints shadow bytes (the numpy arrays of the shadows), seconds, and ratios against BEFORE. A version
that reports a race (BEFORE's false ones, last column) stops there: its figures are only up to it.

    .venv/bin/python benchmarks/race_shadow_subword.py [--mb 16] [--ranks 8] [--before 7cba165]

Patterns, all on one peer buffer, every rank writing then (after a barrier) rank 0 reading all of it:
  tiles       each rank writes its 1/ranks slice in 4 KiB runs (whole words: the common case)
  segments    each rank writes one contiguous segment whose ends fall mid-word (bf16, a sample sort's
              exchange): 4 KiB runs, split words only at the segment ends
  warps       as tiles, in 128-byte runs (a warp's coalesced store: the per-event cost), on a buffer 16
              times smaller
  interleave  rank r writes bf16 element r of every group of `ranks` (2-byte runs; every word is split),
              on a buffer 64 times smaller (one event per element)
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
import types

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pkbsim.device.ir import Event  # noqa: E402
from pkbsim.world.clocks import VectorClocks  # noqa: E402


def load(source: str, name: str, word: int | None = None) -> types.ModuleType:
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)  # noqa: S102 - this repository's own code
    if word is not None:
        mod.WORD = word
    return mod


def shadow_bytes(det) -> tuple[int, int, int]:
    """(bytes of the numpy arrays the detector's shadows hold (pages and any side stores), pages, expanded pages)."""
    seen, total, pages, expanded = set(), 0, 0, 0

    def walk(obj):
        nonlocal total
        for v in vars(obj).values():
            if isinstance(v, np.ndarray) and id(v) not in seen:
                seen.add(id(v))
                total += v.nbytes
            elif hasattr(v, "__dict__") and not isinstance(v, type) and type(v).__module__ == type(obj).__module__:
                walk(v)

    for sh in det._shadows.values():
        for page in sh.pages.values():
            pages += 1
            expanded += not page.uniform
            walk(page)
    return total, pages, expanded


class Buf:
    """A weak-referenceable stand-in for an allocation (the detector keys its shadows by the allocation)."""


def barrier(clocks, n):
    published = [clocks.release(r) for r in range(n)]
    for q in range(n):
        for p in published:
            clocks.acquire(q, p)


def runs(pattern: str, size: int, n: int, rng) -> list[list[tuple[int, int]]]:
    """Per rank, the byte runs [lo, hi) it writes."""
    chunk = 4096
    if pattern in ("tiles", "warps"):
        per, chunk = size // n, chunk if pattern == "tiles" else 128
        return [[(lo, min(lo + chunk, (r + 1) * per)) for lo in range(r * per, (r + 1) * per, chunk)] for r in range(n)]
    if pattern == "segments":
        cuts = [0, *sorted(2 * int(x) for x in rng.choice(np.arange(1, size // 2), n - 1, replace=False)), size]
        cuts = [c | 2 if 0 < c < size else c for c in cuts]   # mid-word ends (odd bf16 offsets)
        return [[(lo, min(lo + chunk, cuts[r + 1])) for lo in range(cuts[r], cuts[r + 1], chunk)] for r in range(n)]
    return [[(2 * i, 2 * i + 2) for i in range(r, size // 2, n)] for r in range(n)]


def measure(mod, pattern: str, size: int, n: int) -> tuple[int, float, str]:
    clocks = VectorClocks(n)
    det = mod.RaceDetector(clocks)
    buf = Buf()
    plan = runs(pattern, size, n, np.random.default_rng(0))
    t0 = time.perf_counter()
    verdict = "ok"
    for r in range(n):
        for lo, hi in plan[r]:
            hit = det.access(buf, Event("put", r, "p.py", "k", 0, lo, hi), write=True)
            if hit is not None:
                verdict = f"{hit[1]} (bytes {lo}-{hi})"
                break
        if verdict != "ok":
            break
    if verdict == "ok":
        barrier(clocks, n)
        for lo in range(0, size, 1 << 20):
            hit = det.access(buf, Event("get", 0, "p.py", "k", 0, lo, min(size, lo + (1 << 20))), write=False)
            if hit is not None:
                verdict = hit[1]
                break
    return shadow_bytes(det)[0], time.perf_counter() - t0, verdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=16, help="buffer size of tiles and segments (MiB)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each version (the fastest is shown)")
    ap.add_argument("--before", default="7cba165", help="git revision of the 4-byte-cell detector")
    args = ap.parse_args()
    old = subprocess.run(["git", "-C", ROOT, "show", f"{args.before}:pkbsim/device/races.py"], check=True,
                         capture_output=True, text=True).stdout
    with open(os.path.join(ROOT, "pkbsim", "device", "races.py")) as f:
        new = f.read()
    versions = {"before (4-byte cells)": load(old, "races_before"),
                "2-byte cells": load(old, "races_word2", word=2),
                "after (split words)": load(new, "races_after")}
    size = int(args.mb * 2**20) // 4096 * 4096
    shrink = {"tiles": 1, "segments": 1, "warps": 16, "interleave": 64}
    print(f"{args.ranks} ranks; buffer {size / 2**20:.2f} MiB, divided by {shrink}")
    for pattern, k in shrink.items():
        nbytes = size // k
        got = {label: [] for label in versions}
        for _ in range(args.repeat):   # interleaved, so that no version alone pays for the first touch of memory
            for label, mod in versions.items():
                got[label].append(measure(mod, pattern, nbytes, args.ranks))
        base = None
        for label, runs_ in got.items():
            mem, secs, verdict = runs_[0][0], min(x[1] for x in runs_), runs_[0][2]
            base = base or (mem, secs)
            print(f"  {pattern:10s} {label:22s} shadow {mem / 2**20:8.1f} MiB ({mem / nbytes:5.1f} B/byte, "
                  f"x{mem / base[0]:.2f})  {secs:6.2f} s (x{secs / base[1]:.2f})  {verdict}")


if __name__ == "__main__":
    main()
