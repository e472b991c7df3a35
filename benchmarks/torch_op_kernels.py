"""Torch ops that CUDA runs as several kernels or several passes (pkbsim/timing/op_kernels.py), timed on one
GPU against pkb's replay of the same call: the held-out check of those rules. The rules restate torch's CUDA
code; the solutions' ops that showed the need (benchmarks/results/device_program_kernels_measured_h200.json)
are not among these cases, which differ in shape, dtype or path, and add controls the rules leave alone and
ops pkb knows it misses (a sum over one row). triu and the small gather were written as misses and got rules
(2026-12-05) before they were measured: they count as rule cases.

    . benchmarks/gpu_env.sh; python3 benchmarks/torch_op_kernels.py measure OUT.json     # on the GPU
    python benchmarks/torch_op_kernels.py compare MEASURED.json [OUT.json]                # here

`measure`: each case's inputs made once, two warm-up calls, then five calls under torch.profiler; a call's
time is its GPU activities' device time summed (every kernel, memset and copy the op launched), the median
over the five. Imports only torch. `compare`: each case as a program of one simulated rank (`pkb check`'s
world, record_compute), the op's compute records replayed on the measured GPU's topology with its calibration
(benchmarks/gpu_machines.py: hgx-h200 with results/calibration_h200.json, hgx-h100 with calibration_h100.json),
their times summed; prints measured, predicted and error per case,
and the median and largest |error| of the rule cases and of the controls. No asserts.
"""
from __future__ import annotations

import io
import json
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# (name, role, setup, op): `dev` is the device; role "rule" (an op_kernels rule applies, including its
# L2 side: a row re-read while the resident rows fit the L2 costs nothing), "control" (none applies: one
# pass), "path" (an elementwise op on a slow CUDA path, pkbsim.timing.kernel_path) or "known miss" (pkb's
# model is known to miss it; measured to size the gap)
CASES = [
    ("sum of a bool mask", "rule", "m = torch.rand(8192, 4096, device=dev) > 0.5", "m.sum()"),
    ("sum of int32 rows", "rule", "v = torch.randint(0, 9, (8192, 4096), device=dev, dtype=torch.int32)",
     "v.sum(dim=1)"),
    ("bf16 rows summed into float32", "control", "b = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)",
     "b.sum(dim=-1, dtype=torch.float32)"),
    ("float32 rows summed", "control", "x = torch.randn(8192, 4096, device=dev)", "x.sum(dim=-1)"),
    ("logsumexp, float32 rows of 8192", "rule", "x = torch.randn(4096, 8192, device=dev)",
     "torch.logsumexp(x, -1)"),
    ("logsumexp, bf16 rows of 32768", "rule", "x = torch.randn(2048, 32768, device=dev, dtype=torch.bfloat16)",
     "torch.logsumexp(x, -1)"),
    ("logsumexp over dim 0", "rule", "x = torch.randn(8192, 4096, device=dev)", "torch.logsumexp(x, 0)"),
    ("log_softmax, rows of 4096 (registers)", "control", "x = torch.randn(8192, 4096, device=dev)",
     "torch.log_softmax(x, -1)"),
    ("softmax, rows of 11264 (shared memory)", "control", "x = torch.randn(2048, 11264, device=dev)",
     "torch.softmax(x, -1)"),
    ("softmax, float32 rows of 16384", "rule", "x = torch.randn(2048, 16384, device=dev)", "torch.softmax(x, -1)"),
    ("log_softmax, float32 rows of 32000", "rule", "x = torch.randn(1024, 32000, device=dev)",
     "torch.log_softmax(x, -1)"),
    ("softmax, float32 rows of 65536 (past the L2)", "rule", "x = torch.randn(512, 65536, device=dev)",
     "torch.softmax(x, -1)"),
    ("log_softmax, bf16 rows of 50304", "rule", "x = torch.randn(1024, 50304, device=dev, dtype=torch.bfloat16)",
     "torch.log_softmax(x, -1)"),
    ("softmax, bf16 rows of 16384 (shared memory)", "control",
     "x = torch.randn(4096, 16384, device=dev, dtype=torch.bfloat16)", "torch.softmax(x, -1)"),
    ("cross_entropy, float32 logits of 32000", "rule",
     "x = torch.randn(4096, 32000, device=dev); t = torch.randint(0, 32000, (4096,), device=dev)",
     "torch.nn.functional.cross_entropy(x, t)"),
    ("layer_norm, float32 rows of 1024", "rule",
     "x = torch.randn(32768, 1024, device=dev); w = torch.randn(1024, device=dev)",
     "torch.nn.functional.layer_norm(x, (1024,), w)"),
    ("layer_norm, float32 rows of 4096", "rule", "x = torch.randn(8192, 4096, device=dev)",
     "torch.nn.functional.layer_norm(x, (4096,))"),
    ("layer_norm, bf16 rows of 8192", "rule",
     "x = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16); w = torch.randn(8192, device=dev, "
     "dtype=torch.bfloat16); b = torch.randn(8192, device=dev, dtype=torch.bfloat16)",
     "torch.nn.functional.layer_norm(x, (8192,), w, b)"),
    ("layer_norm, float32 rows of 16384 (past the L2)", "rule", "x = torch.randn(4096, 16384, device=dev)",
     "torch.nn.functional.layer_norm(x, (16384,))"),
    ("rms_norm, bf16 rows of 16384 (past the L2)", "rule",
     "x = torch.randn(8192, 16384, device=dev, dtype=torch.bfloat16)", "torch.nn.functional.rms_norm(x, (16384,))"),
    ("rms_norm, bf16 rows of 4096", "rule",
     "x = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16); w = torch.randn(4096, device=dev, "
     "dtype=torch.bfloat16)", "torch.nn.functional.rms_norm(x, (4096,), w)"),
    ("rms_norm, float32 rows of 2048", "rule", "x = torch.randn(16384, 2048, device=dev)",
     "torch.nn.functional.rms_norm(x, (2048,))"),
    ("masked_fill, a broadcast causal mask", "rule",
     "x = torch.randn(16, 2048, 2048, device=dev); m = torch.ones(2048, 2048, device=dev, dtype=torch.bool).triu(1)",
     "x.masked_fill(m, float('-inf'))"),
    ("masked_fill, a full mask", "rule",
     "x = torch.randn(16, 2048, 2048, device=dev); m = torch.rand(16, 2048, 2048, device=dev) > 0.5",
     "x.masked_fill(m, 0.0)"),
    ("cat of two column halves (bf16)", "rule", "y = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)",
     "torch.cat([y[:, 2048:], y[:, :2048]], dim=-1)"),
    ("cat along dim 0", "control", "x = torch.randn(8192, 2048, device=dev)", "torch.cat([x, x], 0)"),
    ("cat of contiguous tensors along dim 1", "control",
     "a = torch.randn(8192, 2048, device=dev); c = torch.randn(8192, 2048, device=dev)", "torch.cat([a, c], 1)"),
    # the slow elementwise paths (kernel_path: "cast", "strided") at 64 Mi elements of 1, 2 and 4 bytes
    ("bf16 times a broadcast bf16 row", "path",
     "x = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16); w = torch.randn(8192, device=dev, "
     "dtype=torch.bfloat16)", "x * w"),
    ("float32 plus a broadcast column", "path",
     "x = torch.randn(8192, 8192, device=dev); c = torch.randn(8192, 1, device=dev)", "x + c"),
    ("int8 to float32", "path", "q = torch.randint(-9, 9, (8192, 8192), device=dev, dtype=torch.int8)",
     "q.float()"),
    ("float16 to float32", "path", "h = torch.randn(8192, 8192, device=dev, dtype=torch.float16)", "h.float()"),
    ("float32 plus bf16, in place", "path",
     "x = torch.randn(8192, 8192, device=dev); y = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)",
     "x.add_(y)"),
    ("a transposed float32 matrix made contiguous", "path", "x = torch.randn(8192, 8192, device=dev)",
     "x.t().contiguous()"),
    # a sum over the outer dim: of 8 rows (a reduce-scatter's local sum at 8 ranks) and of 1 (the same at 1)
    ("float32 [8, 8 Mi] summed over dim 0", "control", "s = torch.randn(8, 8388608, device=dev)", "s.sum(0)"),
    ("float32 [1, 64 Mi] summed over dim 0", "known miss", "s = torch.randn(1, 67108864, device=dev)",
     "s.sum(0)"),
    ("triu of a bool matrix", "rule", "o = torch.ones(8192, 8192, device=dev, dtype=torch.bool)", "o.triu(1)"),
    ("triu of a float32 matrix", "rule", "x = torch.randn(8192, 8192, device=dev)", "x.triu()"),
    ("gather one logit a row (bf16)", "rule",
     "x = torch.randn(8192, 32000, device=dev, dtype=torch.bfloat16); i = torch.randint(0, 32000, (8192, 1), "
     "device=dev)", "x.gather(1, i)"),
    # added 2026-12-05 (fourth session), before the rules they check were written and before any was measured:
    # a reduction over dims of size 1 only (one input an output: reduce_kernel, not a copy)
    ("bf16 [1, 32 Mi] summed over dim 0", "rule", "s = torch.randn(1, 33554432, device=dev, dtype=torch.bfloat16)",
     "s.sum(0)"),
    ("float32 [4096, 1, 4096] amax over dim 1", "rule", "s = torch.randn(4096, 1, 4096, device=dev)", "s.amax(1)"),
    ("float32 [16 Mi, 1] mean over the last dim", "rule", "s = torch.randn(16777216, 1, device=dev)", "s.mean(-1)"),
    ("float32 [2, 32 Mi] summed over dim 0", "control", "s = torch.randn(2, 33554432, device=dev)", "s.sum(0)"),
    # small kernels: a contiguous cast, a reduce kernel's floor
    ("bf16 8192 to float32", "rule", "y = torch.randn(8192, device=dev, dtype=torch.bfloat16)", "y.float()"),
    ("bool 8192 to float32", "rule", "m = torch.rand(8192, device=dev) > 0.5", "m.float()"),
    ("float32 [8, 8192] summed over dim 0", "rule", "p = torch.randn(8, 8192, device=dev)", "p.sum(0)"),
    ("float32 [128, 64] summed over rows", "rule", "r = torch.randn(128, 64, device=dev)", "r.sum(-1)"),
    ("float32 [1, 8192] summed over dim 0", "rule", "p = torch.randn(1, 8192, device=dev)", "p.sum(0)"),
    ("int64 [1] floor-divided by 16", "known miss", "k = torch.tensor([1000], device=dev)", "k // 16"),
    # added 2026-12-05 (sixth session), after the rule for reads a cache line each (kernel_path.scattered_reads)
    # was written from the float32 transpose above and before any of these was measured (held out)
    ("a transposed bf16 matrix made contiguous", "path",
     "x = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)", "x.t().contiguous()"),
    ("a transposed float32 [4096, 16384] made contiguous", "path", "x = torch.randn(4096, 16384, device=dev)",
     "x.t().contiguous()"),
    ("bf16 [4, 4096, 32, 128] heads moved before the sequence", "path",
     "q = torch.randn(4, 4096, 32, 128, device=dev, dtype=torch.bfloat16)", "q.transpose(1, 2).contiguous()"),
    ("every other column of a float32 matrix", "path", "x = torch.randn(8192, 16384, device=dev)",
     "x[:, ::2].contiguous()"),
    ("a transposed float32 matrix plus itself", "path", "x = torch.randn(8192, 8192, device=dev)", "x + x.t()"),
]


def program(setup: str, op: str, warm_up: bool = True) -> tuple[str, int]:
    """A program making the inputs and calling the op: twice where measure() times a call after warm-up ones
    (the op's inputs are where its last call left them: pkbsim.timing.reuse); (its source, the timed call's
    line)."""
    lines = ["import torch", "dev = 'cuda'", *setup.split("; "), *([f"warm_up = {op}"] if warm_up else []),
             f"out = {op}"]
    return "\n".join(lines) + "\n", len(lines)


def measure(out_path: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    rows = []
    for name, role, setup, op in CASES:
        row = {"case": name, "role": role, "op": op}
        try:
            ns = {"torch": torch, "dev": "cuda"}
            exec("\n".join(setup.split("; ")), ns)
            fn = eval(f"lambda: {op}", ns)
            for _ in range(2):
                fn()
            torch.cuda.synchronize()
            calls = []
            for _ in range(5):
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    fn()
                    torch.cuda.synchronize()
                events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
                calls.append((sum(e.device_time for e in events), sorted({e.name[:90] for e in events})))
            row["measured_us"] = statistics.median(t for t, _ in calls)
            row["kernels"] = calls[0][1]
            print(f"{name}: {row['measured_us']:.1f} us, {len(row['kernels'])} kernels", flush=True)
        except Exception as e:
            row["error"] = repr(e)[:400]
            print(f"{name}: ERROR {e!r}"[:300], flush=True)
        rows.append(row)
        ns = None
        torch.cuda.empty_cache()
        with open(out_path, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


def predicted_us(setup: str, op: str, topology: str, calibration: str, warm_up: bool = True) -> float:
    """pkb's time for the op's call (after a warm-up call of it, or not): its compute records on one simulated
    rank, replayed on `topology`."""
    from pkbsim.timing.replay import Replay
    from pkbsim.timing.topology import load_topology
    from pkbsim.world.check import check_script
    from pkbsim.world.launcher import RunOptions
    from pkbsim.world.trace import records_doc
    src, line = program(setup, op, warm_up)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "case.py")
        with open(path, "w") as f:
            f.write(src)
        res = check_script(path, [], RunOptions(nproc=1, record_compute=True, output=io.StringIO()))
    ops = [r for r in res.traces[0].records
           if r.get("kind") == "compute" and r["site"].endswith(f"case.py:{line}")]
    if not ops:
        raise RuntimeError("no compute record on the op's line: " + "; ".join(f.render() for f in res.findings))
    replay = Replay(load_topology(topology), records_doc(1, [ops], {}), calibration=calibration)
    replay.run()
    return sum(k.end - k.start for k in replay.kernels if k.kind == "compute")


def compare(in_path: str, out_path: str | None) -> None:
    from benchmarks.gpu_machines import machine
    doc = json.load(open(in_path))
    cases = {c[0]: c for c in CASES}
    rows = []
    topology, calibration = machine(doc.get("gpu", ""))
    print(f"measured: {doc.get('gpu')}, torch {doc.get('torch')}; predicted: {topology}, "
          f"{os.path.relpath(calibration, ROOT)}")
    print("| case | role | measured | predicted | error |\n|---|---|---|---|---|")
    for m in doc["rows"]:
        if "measured_us" not in m or m["case"] not in cases:
            print(f"| {m['case']} | {m['role']} | {m.get('error', 'not measured')[:60]} | | |")
            continue
        _, role, setup, op = cases[m["case"]]
        p = predicted_us(setup, op, topology, calibration)
        err = (p - m["measured_us"]) / m["measured_us"]
        rows.append({"case": m["case"], "role": role, "measured_us": round(m["measured_us"], 2),
                     "predicted_us": round(p, 2), "error": round(err, 3)})
        print(f"| {m['case']} | {role} | {m['measured_us']:.1f} us | {p:.1f} | {100 * err:+.1f}% |", flush=True)
    summary = {}
    for role in ("rule", "control", "path", "known miss"):
        errs = [abs(r["error"]) for r in rows if r["role"] == role]
        if errs:
            summary[role] = {"cases": len(errs), "median_abs_error": round(statistics.median(errs), 3),
                             "max_abs_error": round(max(errs), 3)}
            print(f"{role}: {len(errs)} cases, median |error| {100 * statistics.median(errs):.1f}%, "
                  f"max {100 * max(errs):.1f}%")
    if out_path:
        with open(out_path, "w") as f:
            json.dump({"gpu": doc.get("gpu"), "torch": doc.get("torch"), "topology": topology, "rows": rows,
                       "summary": summary}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("measure", "compare"):
        sys.exit(__doc__)
    if sys.argv[1] == "measure":
        measure(sys.argv[2])
    else:
        compare(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
