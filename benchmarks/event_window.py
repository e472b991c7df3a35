"""What CUDA events around one eager call add to a kernel's time, measured the way kraken's benchmark times its
all-reduce (meta-pytorch/kraken, kraken/_logging/benchmarking.py benchmark_with_event, as pytorch/helion PR #245's
8 x H100 table was timed): a sleep kernel queued first so the host runs ahead, then per call an L2-flush memset of
256 MB, a start event, the call, an end event; the median of 25 elapsed times. Set against the same kernel's
device time (torch.profiler, median of 25) the difference is the window: the event records and the kernel's
dispatch behind the memset, which the GPU runs but a profiler's kernel time does not hold. pkb charges it to
points timed this way (fidelity.harness_us, harness "cuda-events"; data/host.toml event_window_us).

    . benchmarks/gpu_env.sh; python3 benchmarks/event_window.py OUT.json     # on the GPU

Kernels: a one-element add (torch's vectorized elementwise kernel) and an empty Triton kernel of 32 warps (the
launch shape of kraken's one-shot). Imports only torch and triton; a script that measures, no asserts.
"""
from __future__ import annotations

import json
import statistics
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _touch(x):
    tl.store(x, tl.load(x) + 1)


def kernels() -> dict:
    z = torch.zeros(1, device="cuda")
    return {"x.add_(1), one float32": lambda: z.add_(1),
            "Triton, one program of 32 warps": lambda: _touch[(1,)](z, num_warps=32)}


def device_us(fn) -> float:
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(25):
            fn()
        torch.cuda.synchronize()
    times = [e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return statistics.median(times)


def event_us(fn, cache: torch.Tensor) -> tuple[float, list[float]]:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e7))    # about 10 ms: the host queues every call before the GPU reaches them
    pairs = []
    for _ in range(25):
        cache.zero_()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        pairs.append((begin, end))
    torch.cuda.synchronize()
    times = [b.elapsed_time(e) * 1e3 for b, e in pairs]
    return statistics.median(times), [min(times), max(times)]


def main(out_path: str) -> None:
    cache = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    rows = []
    for name, fn in kernels().items():
        dev = device_us(fn)
        ev, spread = event_us(fn, cache)
        rows.append({"kernel": name, "device_us": round(dev, 2), "event_us": round(ev, 2),
                     "event_spread_us": [round(t, 2) for t in spread], "window_us": round(ev - dev, 2)})
        print(f"{name}: device {dev:.2f} us, events {ev:.2f} us, window {ev - dev:.2f} us", flush=True)
    with open(out_path, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
