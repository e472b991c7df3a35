"""Can the scorer tell a kernel 5% faster than the reference, and does it keep one 2% slower from being called
faster? A synthetic ParallelKernelBench-style checkout of our own, made on the GPU it is scored on: problem 1's
reference spins the device for a number of cycles (`torch.cuda._sleep`) and doubles its input; the candidates
do the same with fewer cycles (5% less time per call) or more (2% more). The cycle counts are calibrated
first on the same device, timed as the scorer times (back to back, one region), so that the reference takes
--target-us per call.

Writes the checkout under DIR (reference/1_spin.py, utils/input_output_tensors.py, solutions/1_spin_*.py) and
prints the calibrated times (the target is raised to twice the host's floor per call where that is above it); `pkb score` is run on it by the caller (benchmarks/score_resolution_gpu.sh).
Usage (GPU): python benchmarks/synthetic_speedups.py DIR [--target-us 20]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

BUILDER = '''"""Inputs of the synthetic timing checkout: one bf16 tensor per rank, random per trial."""
import torch


def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):
    gen = torch.Generator(device=device).manual_seed(trial * 1009 + rank)
    return (torch.randn(base_shape, generator=gen, device=device).to(dtype),)
'''

SOLUTION = '''"""{what}: spin the device for {cycles} cycles, then double the input (synthetic timing problem)."""
import torch

CYCLES = {cycles}


def solution(tensor):
    torch.cuda._sleep(CYCLES)
    return tensor * 2
'''


def per_call_us(cycles: int, xs: list[torch.Tensor]) -> float:
    """Back to back, one event pair, each call on an input of its own, as the scorer's batches: microseconds
    per call (median of 5)."""
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for x in xs:
            torch.cuda._sleep(cycles)
            x * 2
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / len(xs))
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--target-us", type=float, default=20.0)
    args = ap.parse_args()
    xs = [torch.randn(1024, 1024, device="cuda").to(torch.bfloat16) for _ in range(2000)]
    per_call_us(1000, xs[:200])  # warm-up
    # the host's floor: launching a call costs time whatever the spin; below it a batch is bound by the host and
    # the cycles change nothing (an H100 host launched 17 us calls with 13-19 thousand cycles alike). The line
    # is fitted where the device's time is well above that floor, and the target raised to clear it
    floor = per_call_us(0, xs)
    target = max(args.target_us, 2 * floor)   # the scorer's own loop adds a few us a call to the floor
    lo = 5000
    while per_call_us(lo, xs) < 1.3 * floor:
        lo *= 2
    hi = 4 * lo
    t_lo, t_hi = per_call_us(lo, xs), per_call_us(hi, xs)
    slope = (t_hi - t_lo) / (hi - lo)
    cycles = {name: max(0, round(lo + (factor * target - t_lo) / slope))
              for name, factor in (("reference", 1.0), ("faster", 0.95), ("slower", 1.02))}
    measured = {name: per_call_us(c, xs) for name, c in cycles.items()}
    for sub in ("reference", "utils", "solutions"):
        os.makedirs(os.path.join(args.dir, sub), exist_ok=True)
    with open(os.path.join(args.dir, "utils", "input_output_tensors.py"), "w") as f:
        f.write(BUILDER)
    with open(os.path.join(args.dir, "reference", "1_spin.py"), "w") as f:
        f.write(SOLUTION.format(what="Reference", cycles=cycles["reference"]))
    for name, what in (("faster", "5% less time per call"), ("slower", "2% more time per call"),
                       ("reference", "The reference itself")):
        with open(os.path.join(args.dir, "solutions", f"1_spin_{name}.py"), "w") as f:
            f.write(SOLUTION.format(what=what, cycles=cycles[name]))
    doc = {"device": torch.cuda.get_device_name(), "host_floor_us": floor, "target_us": target, "cycles": cycles,
           "per_call_us": measured,
           "expected_speedup": {n: measured["reference"] / t for n, t in measured.items()}}
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
