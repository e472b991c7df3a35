"""Overhead of the simulated world, measured in one run (no asserts; prints numbers).

- per-op cost of a small collective: 8 ranks, 1 KiB all_reduce, many iterations;
- per-op cost of a ring of batched isend/irecv at 8 ranks;
- start-up + tear-down of a 72-rank world (init_process_group, one barrier, destroy).
Usage: python benchmarks/world_overhead.py [--iters N] [--json]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import time

import pkbsim.plugins  # noqa: F401 - the plug-ins every run installs, as in pkb check
from pkbsim.world.launcher import RunOptions, run_script

ALL_REDUCE = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
x = torch.ones(256, device="cuda")  # 1 KiB
dist.barrier()
t0 = time.perf_counter()
for _ in range({iters}):
    dist.all_reduce(x)
dist.barrier()
if dist.get_rank() == 0:
    print("PER_OP_US", (time.perf_counter() - t0) / {iters} * 1e6)
"""

RING = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
r, w = dist.get_rank(), dist.get_world_size()
x, y = torch.ones(256, device="cuda"), torch.empty(256, device="cuda")
dist.barrier()
t0 = time.perf_counter()
for _ in range({iters}):
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, (r + 1) % w), dist.P2POp(dist.irecv, y, (r - 1) % w)]):
        q.wait()
dist.barrier()
if r == 0:
    print("PER_OP_US", (time.perf_counter() - t0) / {iters} * 1e6)
"""

STARTUP = """
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.barrier()
dist.destroy_process_group()
"""


def _run(src: str, nproc: int) -> tuple[float, float | None]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src)
    out = io.StringIO()
    try:
        t0 = time.perf_counter()
        res = run_script(f.name, [], RunOptions(nproc=nproc, timeout=600, output=out))
        wall = time.perf_counter() - t0
    finally:
        os.unlink(f.name)
    if res.verdict != "ok":
        raise SystemExit(f"benchmark program failed: {res.verdict}: {[x.message for x in res.findings]}")
    per_op = [float(line.split()[-1]) for line in out.getvalue().splitlines() if "PER_OP_US" in line]
    return wall, per_op[0] if per_op else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    _run(STARTUP, 2)  # warm imports
    _, ar = _run(ALL_REDUCE.format(iters=args.iters), 8)
    _, ring = _run(RING.format(iters=args.iters // 2), 8)
    walls = [_run(STARTUP, 72)[0] for _ in range(3)]
    res = {"all_reduce_1KiB_8ranks_us_per_op": round(ar, 1), "batched_ring_8ranks_us_per_op": round(ring, 1),
           "startup_teardown_72ranks_s": round(min(walls), 3), "cores": os.cpu_count()}
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:40s} {v}")


if __name__ == "__main__":
    main()
