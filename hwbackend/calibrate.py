"""`pkb calibrate`: measure on this node what the simulator's topology model needs.

Run under torchrun (one process per GPU) by `pkb calibrate`; rank 0 writes one JSON document:
GEMM rates per dtype, HBM copy bandwidth and launch overheads (on rank 0's GPU alone), and with more
than one GPU the eager collective sweep (every collective at sizes 8 B, 32 B, ... up to --max-bytes).
Timing: CUDA events around a batch of launches after warm-up, median of repeats.

The `launch` section times LAUNCH_OPS back-to-back `x.add_(1)` on a one-element CUDA tensor:
  eager_op_us     per op issued from eager PyTorch; the host issues more slowly than the device runs
                  such a kernel, so this is the host's cost per kernel (Python and the dispatcher)
  graph_op_us     per op when the same ops are replayed from one CUDA graph: kernel plus the device's
                  gap between graph kernels
  tiny_kernel_us  the kernel's own duration on the device (CUDA activity timestamps from torch.profiler,
                  median), so graph_op_us - tiny_kernel_us is the gap a graph adds per kernel
"""
from __future__ import annotations

import datetime
import functools
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
from torch.autograd import DeviceType

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
LAUNCH_OPS = 500


def _time_ms(fn, reps: int = 5, inner: int = 10) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def gemm_rates(n: int = 8192) -> dict:
    out = {}
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32),
                        ("tf32", torch.float32)):
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        a, b = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
        ms = _time_ms(functools.partial(torch.matmul, a, b))
        out[name] = {"n": n, "ms": ms, "tflops": 2 * n ** 3 / ms / 1e9}
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def hbm_copy(nbytes: int = 2 << 30) -> dict:
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = _time_ms(lambda: dst.copy_(src), inner=5)
    return {"bytes": nbytes, "ms": ms, "GBps_read_plus_write": 2 * nbytes / ms / 1e6}


def launch_overheads() -> dict:
    x = torch.zeros(1, device="cuda")

    def ops():
        for _ in range(LAUNCH_OPS):
            x.add_(1)

    eager = _time_ms(ops, reps=10, inner=1)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops()
    replay = _time_ms(graph.replay, reps=10, inner=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        ops()
        torch.cuda.synchronize()
    kernels = [e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA]
    if not kernels:
        raise RuntimeError("torch.profiler recorded no CUDA kernels; is CUPTI available?")
    return {"op": "x.add_(1), x one float32 element", "ops": LAUNCH_OPS, "eager_op_us": eager * 1e3 / LAUNCH_OPS,
            "graph_op_us": replay * 1e3 / LAUNCH_OPS, "tiny_kernel_us": statistics.median(kernels)}


def _collective(op: str, nbytes: int, world: int):
    n = max(world, nbytes // 4 // world * world)
    x = torch.randn(n, device="cuda")
    if op == "all_reduce":
        return lambda: dist.all_reduce(x), n * 4, 2 * (world - 1) / world
    if op == "broadcast":
        return lambda: dist.broadcast(x, 0), n * 4, 1.0
    if op == "all_gather":
        out = torch.empty(n * world, device="cuda")
        return lambda: dist.all_gather_into_tensor(out, x), n * world * 4, (world - 1) / world
    if op == "reduce_scatter":
        out = torch.empty(n // world, device="cuda")
        return lambda: dist.reduce_scatter_tensor(out, x), n * 4, (world - 1) / world
    out = torch.empty_like(x)
    return lambda: dist.all_to_all_single(out, x), n * 4, (world - 1) / world


def collective_sweep(world: int, max_bytes: int) -> list[dict]:
    rows, size = [], 8
    while size <= max_bytes:
        for op in COLLECTIVES:
            fn, algo_bytes, factor = _collective(op, size, world)
            dist.barrier()
            ms = _time_ms(fn, reps=3, inner=5)
            t = torch.tensor([ms], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            algbw = algo_bytes / (t.item() * 1e6)
            rows.append({"op": op, "bytes": algo_bytes, "mode": "eager", "time_us": t.item() * 1e3,
                         "algbw_GBps": algbw, "busbw_GBps": algbw * factor})
        size *= 4
    return rows


def main() -> int:
    out_path = sys.argv[1]
    max_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    doc = {"schema": "pkb.calibration/1", "date": datetime.date.today().isoformat(),
           "gpu": torch.cuda.get_device_name(), "gpus": world, "torch": torch.__version__,
           "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
           "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_SYMM_MEM", "NVSHMEM_"))}}
    if rank == 0:
        doc["gemm"] = gemm_rates()
        doc["hbm_copy"] = hbm_copy()
        doc["launch"] = launch_overheads()
    if world > 1:
        dist.init_process_group("nccl")
        doc["collectives"] = collective_sweep(world, max_bytes)
        dist.destroy_process_group()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
