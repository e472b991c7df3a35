"""Where a `pkb screen`'s CPU goes, by function, across its processes (the screening process, the candidate's).

    python benchmarks/screen_profile.py [--rate HZ] [--top N] -- SCREEN-ARGUMENTS...

Runs `pkb screen SCREEN-ARGUMENTS` under py-spy (`pip install py-spy`) sampling only the thread that holds the
GIL in each process (--gil: a rank thread waiting for the GIL is not work), and prints the share of samples
each function is on the stack of (inclusive), the heaviest first, and the total in CPU-seconds at the rate.
Numbers for finding where time goes, never asserted: they move with the machine's load.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

FRAME = re.compile(r" \((.*?):\d+\)$")


def profile(screen_args: list[str], rate: int) -> collections.Counter:
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    pkb = os.path.join(os.path.dirname(sys.executable), "pkb")
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "profile.txt")
        subprocess.run([spy, "record", "--gil", "--subprocesses", "--rate", str(rate), "--format", "raw", "-o", raw,
                        "--", pkb, "screen", *screen_args], check=False, stdout=subprocess.DEVNULL)
        counts: collections.Counter = collections.Counter()
        for line in open(raw):
            stack, _, n = line.rpartition(" ")
            frames = {FRAME.sub(r" (\1)", f) for f in stack.split(";")}  # the first names the process
            counts["(all)"] += int(n)
            counts.update(dict.fromkeys(frames, int(n)))
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=200, help="samples per second (default: 200)")
    ap.add_argument("--top", type=int, default=40, help="functions to print (default: 40)")
    ap.add_argument("screen_args", nargs=argparse.REMAINDER, help="after --: pkb screen's arguments")
    args = ap.parse_args()
    counts = profile([a for a in args.screen_args if a != "--"], args.rate)
    total = counts.pop("(all)", 0)
    print(f"{total} samples, {total / args.rate:.1f} CPU-s holding the GIL")
    for name, n in counts.most_common(args.top):
        print(f"{n / max(total, 1):6.1%} {n / args.rate:6.2f} s  {name[:140]}")


if __name__ == "__main__":
    main()
