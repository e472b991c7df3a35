"""Device kernels timed by pkb's model against one real GPU (world size 1): the microbenchmarks of
benchmarks/device_kernels.py, Triton and inline CUDA.

    python benchmarks/device_kernel_model_check.py measure OUT.json    # on the GPU: time each launch
    python benchmarks/device_kernel_model_check.py compare OUT.json    # here: pkb's prediction next to it

`measure` times each case's kernel with torch.profiler (device time, median of 10 launches after 3 warm-ups)
and, for reference, with CUDA events around one launch (median of 20; these include the host's launch);
inputs are made once, each case's buffers larger than the L2 but the ping-pong's and the atomics' counters;
it needs only torch and triton. `compare` runs the
same kernel on one simulated rank at a smaller n (Triton's interpreter, the PTX interpreter for the
extension), scales the kernel's work record to the measured n by the cost stage's rule
(pkbsim.timing.trace_scale; a fixed grid stays fixed) and times it with pkbsim.timing.device_kernel on
hgx-h200's GPU; it prints measured, predicted, the error and what bounds the kernel, and the median and
largest error. No asserts.
"""
from __future__ import annotations

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.device_kernels import CASES, kernel_name, setup  # noqa: E402


def measure(out_path: str) -> None:
    import torch
    rows = []
    for name, n, _, _ in CASES:
        try:
            launch, nbytes = setup(name, n, "cuda")
            for _ in range(3):
                launch()
            torch.cuda.synchronize()
            times = []
            for _ in range(20):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                launch()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e3)
            event_us = statistics.median(times)
            us = kernel_us(launch, name) or event_us
            rows.append({"case": name, "n": n, "measured_us": us, "event_us": event_us,
                         "event_spread_us": [min(times), max(times)], "GBps": nbytes / us / 1e3 if nbytes else None})
            print(f"{name:18s} n={n:>10d} {us:10.2f} us  {rows[-1]['GBps'] or 0:8.0f} GB/s", flush=True)
        except Exception as e:   # one broken case must not cost the others
            rows.append({"case": name, "n": n, "error": repr(e)[:300]})
            print(f"{name:18s} n={n:>10d} ERROR {e!r}"[:300], flush=True)
        torch.cuda.empty_cache()
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": __import__("triton").__version__,
           "rows": rows}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


def kernel_us(launch, name: str) -> float:
    """The kernel's own device time (torch.profiler's CUDA activity, median of 10 launches): CUDA events around one
    launch also hold the host's launch of it (10-20 us for a Triton launch), which is not the kernel's."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            launch()
        torch.cuda.synchronize()
    durs = [e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
            and kernel_name(name) in e.name]
    return statistics.median(durs) if durs else None


CALIBRATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "calibration_h200.json")
FITTED = {("t_copy_grid16", 16 << 20), ("c_pingpong", 200), ("t_atomic_spread", 16 << 20),
          ("c_atomic_spread", 16 << 20), ("t_atomic_hot", 4 << 20), ("c_atomic_hot", 4 << 20)}  # one constant each

DRIVER = """
import sys
sys.path.insert(0, {root!r})
from benchmarks.device_kernels import setup
launch, _ = setup({name!r}, {n}, "cuda")
launch()
"""


def kernel_record(name: str, n: int, tmp: str) -> dict:
    """The device-kernel work record of one launch of the case on one simulated rank."""
    from pkbsim.world.launcher import RunOptions, run_script
    path = os.path.join(tmp, f"{name}_{n}.py")
    with open(path, "w") as f:
        f.write(DRIVER.format(root=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name=name, n=n))
    res = run_script(path, [], RunOptions(1, record_compute=True, timeout=600, topology="hgx-h200"))
    devs = [op["device"] for op in res.traces[0].records if op.get("device")]
    if not devs:
        raise RuntimeError(f"{name}: no device kernel recorded ({res.verdict}: "
                           f"{[f.message[:200] for f in res.findings]})")
    return devs[-1]


def compare(in_path: str, out_path: str | None) -> None:
    import tempfile

    from pkbsim.timing.device_kernel import kernel_time
    from pkbsim.timing.host_model import host_model
    from pkbsim.timing.topology import load_topology
    from pkbsim.timing.trace_scale import scale_device
    doc = json.load(open(in_path))
    measured = {(r["case"], r["n"]): r for r in doc["rows"]}
    topo = load_topology("hgx-h200")
    model = host_model(CALIBRATION, topo)   # that GPU's measured HBM copy rate and kernel floor
    rows, cache = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, n, n_pkb, grid in CASES:
            m = measured.get((name, n))
            if m is None or "measured_us" not in m:
                print(f"{name:18s} n={n:>10d} not measured ({m and m.get('error')})")
                continue
            if (name, n_pkb) not in cache:
                cache[(name, n_pkb)] = kernel_record(name, n_pkb, tmp)
            ratio = n / n_pkb if n_pkb else 1.0
            dev = scale_device(cache[(name, n_pkb)], ratio, ratio if grid == "scale" else 1.0)
            t = kernel_time(topo, dev, model, remote_hop_us=0.0)
            err = (t.total_us - m["measured_us"]) / m["measured_us"]
            role = "fitted" if (name, n) in FITTED else "held out"
            rows.append({"case": name, "n": n, "n_pkb": n_pkb, "measured_us": round(m["measured_us"], 2),
                         "predicted_us": round(t.total_us, 2), "error": round(err, 3), "bound": t.bound,
                         "role": role, "device": dev})
            print(f"{name:18s} n={n:>10d} measured {m['measured_us']:9.1f} us  predicted {t.total_us:9.1f} us  "
                  f"{100 * err:+6.1f}%  {t.bound:8s} {role}", flush=True)
    for label, keep in (("all", lambda r: True), ("held out", lambda r: r["role"] == "held out")):
        errs = [abs(r["error"]) for r in rows if keep(r)]
        if errs:
            print(f"{label}: {len(errs)} kernels, median |error| {100 * statistics.median(errs):.1f}%, "
                  f"max {100 * max(errs):.1f}%")
    if out_path:
        with open(out_path, "w") as f:
            json.dump({"gpu": doc.get("gpu"), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("measure", "compare"):
        sys.exit(__doc__)
    if sys.argv[1] == "measure":
        measure(sys.argv[2])
    else:
        compare(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
