"""Where does a host-bound call's time go, batch to batch? The scorer's self-scores of world-size-1 collectives
(all-reduce, all-gather, broadcast of 1024 x 1024 bf16) showed batches of 27-59 us a call in regimes that change
within one process, while GPU-bound batches on the same machine stayed within 1%. This script times the same
kinds of batches as the scorer's worker (back to back on fresh inputs, one event pair, GC off) and records, per
batch, what could explain a regime: the CPU the thread ran on, the thread's own CPU time against the wall
(a slower CPU burns more CPU time for the same work; waiting burns none), context switches, and a fixed
pure-Python loop timed just before (the host's speed, with no torch or NCCL in it).

Variants, interleaved round by round so a regime of the machine hits each alike:
  allreduce   dist.all_reduce of a fresh 1024 x 1024 bf16 tensor per call (NCCL, world size 1)
  allgather   dist.all_gather_into_tensor of the same
  add         x.add_(1) on a fresh tensor (a CUDA launch, no c10d)
Run it as it comes, with `--pin CPUS` (the process and every thread it makes) and `--pin-main CPUS`.
Prints one JSON line per batch and a summary per variant (median, spread of batch medians, the correlations).
With --cpu-scan it first times the plain launch on each CPU in turn (is one core slower than another?); run
several short processes one after another (--rounds 2 --kinds allgather) to see how much a process's own
offset moves its median, free and pinned.
Usage (GPU): python benchmarks/host_bound_noise.py [--rounds 30] [--batches 5] [--calls 650] [--kinds K,K]
             [--pin CPUS | --pin-main CPUS] [--cpu-scan]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import time

import torch
import torch.distributed as dist


def _cpu_now() -> int:
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def _python_probe() -> float:
    """Microseconds of a fixed pure-Python loop: the host's speed at this moment."""
    t0 = time.perf_counter()
    s = 0
    for i in range(200_000):
        s += i & 7
    return (time.perf_counter() - t0) * 1e6


def _batch(kind: str, calls: int, out: torch.Tensor) -> dict:
    xs = [torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(calls)]
    torch.cuda.synchronize()
    probe = _python_probe()
    ru0, cpu0, th0 = resource.getrusage(resource.RUSAGE_THREAD), _cpu_now(), time.thread_time()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gc.disable()
    t0 = time.perf_counter()
    start.record()
    for x in xs:
        if kind == "allreduce":
            dist.all_reduce(x)
        elif kind == "allgather":
            dist.all_gather_into_tensor(out, x)
        else:
            x.add_(1)
    stop.record()
    host = time.perf_counter() - t0
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    gc.enable()
    ru1, th1 = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
    return dict(kind=kind, us_per_call=start.elapsed_time(stop) * 1e3 / calls, host_us=host * 1e6 / calls,
                wall_us=wall * 1e6 / calls, thread_cpu_us=(th1 - th0) * 1e6 / calls, cpu_start=cpu0,
                cpu_end=_cpu_now(), nvcsw=ru1.ru_nvcsw - ru0.ru_nvcsw, nivcsw=ru1.ru_nivcsw - ru0.ru_nivcsw,
                probe_us=probe)


def _corr(a: list[float], b: list[float]) -> float:
    ma, mb = statistics.mean(a), statistics.mean(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    den = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return num / den if den else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--batches", type=int, default=5, help="batches of each variant per round")
    ap.add_argument("--calls", type=int, default=650)
    ap.add_argument("--pin", default=None, help="CPUS (3 or 3,4): the process and every thread it makes on them")
    ap.add_argument("--pin-main", default=None, help="CPUS: only the main thread, after NCCL's threads started")
    ap.add_argument("--kinds", default="allreduce,allgather,add")
    ap.add_argument("--cpu-scan", action="store_true",
                    help="first, the add batch on each CPU in turn (the main thread pinned to it), twice over")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    if args.pin:
        os.sched_setaffinity(0, {int(c) for c in args.pin.split(",")})
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    out = torch.empty(1024, 1024, device="cuda", dtype=torch.bfloat16)
    for kind in ("allreduce", "allgather", "add"):  # warm every path once
        _batch(kind, 50, out)
    if args.cpu_scan:
        mask = os.sched_getaffinity(0)
        for sweep in range(2):
            for cpu in sorted(mask):
                os.sched_setaffinity(0, {cpu})
                t = [_batch("add", args.calls, out)["us_per_call"] for _ in range(3)]
                print(json.dumps(dict(cpu_scan=cpu, sweep=sweep, us_per_call=statistics.median(t))), flush=True)
        os.sched_setaffinity(0, mask)
    if args.pin_main:  # affinity set from a thread binds that thread alone
        os.sched_setaffinity(0, {int(c) for c in args.pin_main.split(",")})
    rows = []
    for r in range(args.rounds):
        for kind in kinds:
            for _ in range(args.batches):
                row = dict(_batch(kind, args.calls, out), round=r, pin=args.pin or args.pin_main)
                rows.append(row)
                print(json.dumps(row), flush=True)
    for kind in kinds:
        mine = [row for row in rows if row["kind"] == kind]
        t = [row["us_per_call"] for row in mine]
        per_round = [statistics.median(row["us_per_call"] for row in mine if row["round"] == r)
                     for r in range(args.rounds)]
        print(json.dumps(dict(
            summary=kind, pin=args.pin or args.pin_main, main_only=bool(args.pin_main), median_us=statistics.median(t), min_us=min(t), max_us=max(t),
            round_spread=(max(per_round) - min(per_round)) / statistics.median(per_round),
            cpus=sorted({row["cpu_start"] for row in mine}),
            corr_probe=_corr(t, [row["probe_us"] for row in mine]),
            corr_thread_cpu=_corr(t, [row["thread_cpu_us"] for row in mine]),
            corr_nivcsw=_corr(t, [float(row["nivcsw"]) for row in mine]),
            thread_cpu_share=statistics.median(row["thread_cpu_us"] / row["host_us"] for row in mine))), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
