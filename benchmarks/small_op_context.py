"""Why small torch ops in the solutions run 2-13x pkb's kernel floor: is it the op's own kernel, or what
the kernel before it left in the L2? Each small op of the vocab and grpo solutions (their full-size shapes,
rebuilt here, not their code) is timed on one GPU in three settings:

- warm: the op alone, called again and again (its inputs in the L2, as the floor's x.add_(1) is);
- after a clean flush: right after a 512 MiB read (the L2 holds other, clean lines);
- after a dirty flush: right after a 512 MiB write (the L2 holds dirty lines the op's misses must evict),
  as in the solutions, where each small op follows a kernel that wrote gigabytes.

    . benchmarks/gpu_env.sh; python3 benchmarks/small_op_context.py OUT.json     # on the GPU
    python benchmarks/small_op_context.py compare MEASURED.json [OUT.json]        # here

`compare` predicts each op warm (its program: the setup, the op, the op again) and after the clean flush (the
setup, the flush's sum, the op) on
one simulated rank, replayed on the measured GPU (benchmarks/torch_op_kernels.predicted_us), next to the
measured times: the held-out check of the reuse-distance rule (pkbsim.timing.reuse, compute.cold_inputs).

Each setting: three warm-up rounds, then seven rounds under torch.profiler; an op's time is the device time
of its own kernels (those after the flush kernel), the median over the rounds. Imports only torch. A script
that measures, no asserts; its output feeds docs/timing_model.md's small-op paragraph.
"""
from __future__ import annotations

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

T, V = 4096, 16032      # vocab_parallel_cross_entropy at full size, 8 ranks: tokens, vocabulary per rank

# (name, setup, op): setup runs once; `dev` is the device
OPS = [
    ("gather one logit a row, bf16 [T, V]", "x = torch.randn(T, V, device=dev, dtype=torch.bfloat16); "
     "i = torch.randint(0, V, (T, 1), device=dev)", "x.gather(1, i)"),
    ("scatter_add_ one value a row, f32 [T, V]", "g = torch.randn(T, V, device=dev); "
     "i = torch.randint(0, V, (T, 1), device=dev); s = torch.ones(T, 1, device=dev)", "g.scatter_add_(1, i, s)"),
    ("a column of bf16 [T, V] to float32", "x = torch.randn(T, V, device=dev, dtype=torch.bfloat16)",
     "x[:, 0].float()"),
    ("bf16 [T] to float32", "y = torch.randn(T, device=dev, dtype=torch.bfloat16)", "y.float()"),
    ("f32 [T] minus f32 [T]", "a = torch.randn(T, device=dev); b = torch.randn(T, device=dev)", "a - b"),
    ("f32 [8, 2, T][:, 1] summed over dim 0", "p = torch.randn(8, 2, T, device=dev)", "p[:, 1].sum(0)"),
    ("f32 [64, 16] summed over rows", "r = torch.randn(64, 16, device=dev)", "r.sum(-1)"),
    ("one float32 plus one", "z = torch.zeros(1, device=dev)", "z.add_(1)"),
    # added 2026-12-05 (fifth session) before the reuse-distance rule was measured against them (held out)
    ("where over f32 [T]", "m = torch.rand(T, device=dev) > 0.5; a = torch.randn(T, device=dev); "
     "b = torch.randn(T, device=dev)", "torch.where(m, a, b)"),
    ("a column of f32 [T, V] times two", "g = torch.randn(T, V, device=dev)", "g[:, 5] * 2.0"),
    ("int64 [T] to float32", "k = torch.randint(0, V, (T,), device=dev)", "k.float()"),
    ("cat of two f32 [T]", "a = torch.randn(T, device=dev); b = torch.randn(T, device=dev)", "torch.cat([a, b])"),
    # added 2026-12-05 (sixth session) after the slow path's step and the scatter's atomic were fitted on the
    # rows above and before any of these was measured (held out)
    ("f16 [T] to float32", "h = torch.randn(T, device=dev, dtype=torch.float16)", "h.float()"),
    ("bf16 [256] to float32", "y = torch.randn(256, device=dev, dtype=torch.bfloat16)", "y.float()"),
    ("a column of bf16 [T, V] times two", "x = torch.randn(T, V, device=dev, dtype=torch.bfloat16)", "x[:, 3] * 2"),
    ("scatter_add_ two values a row, f32 [T, V]", "g = torch.randn(T, V, device=dev); "
     "i = torch.randint(0, V, (T, 2), device=dev); s = torch.ones(T, 2, device=dev)", "g.scatter_add_(1, i, s)"),
    ("scatter_ one value a row, f32 [T, V]", "g = torch.randn(T, V, device=dev); "
     "i = torch.randint(0, V, (T, 1), device=dev); s = torch.ones(T, 1, device=dev)", "g.scatter_(1, i, s)"),
]
FLUSH_BYTES = 512 << 20


def measure(out_path: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    dev = "cuda"
    big = torch.empty(FLUSH_BYTES // 4, device=dev)
    sink = torch.empty((), device=dev)
    flushes = {"warm": None, "after a clean flush": lambda: torch.sum(big, 0, out=sink),
               "after a dirty flush": lambda: big.fill_(1.0)}
    rows = []
    for name, setup, op in OPS:
        ns = {"torch": torch, "dev": dev, "T": T, "V": V}
        exec("\n".join(setup.split("; ")), ns)
        fn = eval(f"lambda: {op}", ns)
        row = {"op": name, "code": op}
        for setting, flush in flushes.items():
            times, names = [], set()
            skip = 0
            if flush:   # the flush's own kernels (a sum may launch more than one)
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    flush()
                    torch.cuda.synchronize()
                skip = sum(e.device_type == torch.autograd.DeviceType.CUDA for e in prof.events())
            for r in range(10):
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    if flush:
                        flush()
                    fn()
                    torch.cuda.synchronize()
                events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                                key=lambda e: e.time_range.start)
                own = events[skip:]
                if r >= 3:
                    times.append(sum(e.device_time for e in own))
                    names.update(e.name[:80] for e in own)
            row[setting] = round(statistics.median(times), 2)
            row.setdefault("kernels", sorted(names))
        print(f"{name}: " + ", ".join(f"{s} {row[s]:.2f} us" for s in flushes), flush=True)
        rows.append(row)
        ns = None
        torch.cuda.empty_cache()
        with open(out_path, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


FLUSH_SETUP = f"big = torch.empty({FLUSH_BYTES // 4}, device=dev); sink = torch.empty((), device=dev)"
# what runs between the setup and the timed call, as measure() runs it: a call of the op itself (warm), or the flush
SETTINGS = {"warm": None, "after a clean flush": "; " + FLUSH_SETUP + "; torch.sum(big, 0, out=sink)"}


def compare(in_path: str, out_path: str | None) -> None:
    from benchmarks.gpu_machines import machine
    from benchmarks.torch_op_kernels import predicted_us
    doc = json.load(open(in_path))
    topology, calibration = machine(doc.get("gpu", ""))
    setups = {name: setup for name, setup, _ in OPS}
    print(f"measured: {doc.get('gpu')}; predicted: {topology}, {os.path.basename(calibration)}")
    print("| op | setting | measured | predicted | error |\n|---|---|---|---|---|")
    rows = []
    for m in doc["rows"]:
        for setting, flush in SETTINGS.items():
            if setting not in m or m["op"] not in setups:
                continue
            p = predicted_us(f"T, V = {T}, {V}; " + setups[m["op"]] + (flush or ""), m["code"], topology,
                             calibration, warm_up=flush is None)
            err = (p - m[setting]) / m[setting]
            rows.append({"op": m["op"], "setting": setting, "measured_us": m[setting], "predicted_us": round(p, 2),
                         "error": round(err, 3)})
            print(f"| {m['op']} | {setting} | {m[setting]:.2f} | {p:.2f} | {100 * err:+.1f}% |", flush=True)
    for setting in SETTINGS:
        errs = [abs(r["error"]) for r in rows if r["setting"] == setting]
        if errs:
            print(f"{setting}: {len(errs)} ops, median |error| {100 * statistics.median(errs):.1f}%, "
                  f"max {100 * max(errs):.1f}%")
    if out_path:
        with open(out_path, "w") as f:
            json.dump({"gpu": doc.get("gpu"), "topology": topology, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) == 2:
        measure(sys.argv[1])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        sys.exit(__doc__)
