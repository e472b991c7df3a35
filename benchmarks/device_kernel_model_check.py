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
the measured GPU (benchmarks/gpu_machines.py); it prints measured, predicted, the error and what bounds
the kernel, and the median and largest error. No asserts.

    python benchmarks/device_kernel_model_check.py programs MEASURED.json [OUT.json] [--records=FILE] [--simulate-missing]
    python benchmarks/device_kernel_model_check.py records FILE [k/n | sk/n | own | solutions]   # pkb's side alone

The same comparison for the kernels of real programs (benchmarks/device_program_kernels.py measures them on the
GPU: the Triton and inline-CUDA corpora, the CUDA test programs, the solutions' inline-CUDA candidate) at
world size 1, at their own sizes and with their size variable x64: each program runs on one simulated rank at the
size the GPU ran (its launch records are taken once by `records`, kept in
benchmarks/results/device_program_kernels_pkb_records.json: the PTX interpreter needs minutes a program on a
loaded 2-core machine), each device kernel launch is timed by pkbsim.timing.device_kernel, and put next to the
same kernel's launches on the GPU (by name). Per kernel: the median over its launches on both sides; for the x64
runs also the screen's scaling rule applied to the own-size record. Then the solutions: each torch op of one
call (its kernels' device time summed) against the replay of pkb's full-size trace.
"""
from __future__ import annotations

import functools
import io
import json
import math
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.device_kernels import CASES, kernel_name, setup  # noqa: E402
from benchmarks.gpu_machines import machine  # noqa: E402


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


# the cases pkbsim.timing.device_kernel's constants were fitted on, one constant each, by the GPU that ran them
FITTED = {"H200": {("t_copy_grid16", 16 << 20), ("t_atomic_spread", 16 << 20), ("c_atomic_spread", 16 << 20),
                   ("t_atomic_hot", 4 << 20), ("c_atomic_hot", 4 << 20),
                   ("c_fence_sys", 64), ("c_fence_gpu", 64), ("c_pingpong", 200)},   # topologies/hgx-h200.toml sync_us
          "H100": {("c_fence_sys", 64), ("c_fence_gpu", 64), ("c_pingpong", 200)}}

DRIVER = """
import sys
sys.path.insert(0, {root!r})
from benchmarks.device_kernels import setup
launch, _ = setup({name!r}, {n}, "cuda")
launch()
"""


def kernel_record(name: str, n: int, tmp: str) -> dict:
    """The device-kernel work record of one launch of the case on one simulated rank."""
    import pkbsim.plugins  # noqa: F401 - the world runs Triton and inline CUDA once they are registered
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
    topology, calibration = machine(doc.get("gpu", ""))
    topo = load_topology(topology)
    model = host_model(calibration, topo)   # that GPU's measured HBM copy rate and kernel floor
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
            fitted = set().union(*(cases for gpu, cases in FITTED.items() if gpu in doc.get("gpu", "")))
            role = "fitted" if (name, n) in fitted else "held out"
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


def base_name(name: str) -> str:
    """A kernel's function name as both sides spell it: a profiler's demangled `void ns::k<T, 4>(float*, int)`
    and a Triton kernel's `k` are both `k`."""
    s = (name or "").replace("(anonymous namespace)", "")
    if s.startswith("void "):
        s = s[5:]
    while re.search(r"<[^<>]*>", s):
        s = re.sub(r"<[^<>]*>", "", s)
    return s.split("(")[0].strip().split("::")[-1]


def program_launches(path: str, argv: list[str]) -> tuple[list[tuple[str, dict]], str | None]:
    """(kernel name, device record) of each device kernel launch of `path` on one simulated rank, in order, and
    what went wrong if the simulated run did not end cleanly."""
    import pkbsim.plugins  # noqa: F401 - the world runs Triton and inline CUDA once they are registered
    from pkbsim.world.launcher import RunOptions, run_script
    res = run_script(os.path.join(ROOT, path), argv,
                     RunOptions(1, record_compute=True, timeout=600, topology="hgx-h200", output=io.StringIO()))
    launches = [(base_name(op["op"]), op["device"]) for op in res.traces[0].records if op.get("device")]
    bad = [f"{f.kind}: {f.message[:160]}" for f in res.findings if f.kind not in ("co_residency",)]
    return launches, ("; ".join(bad) or None)


def program_launches_at(path: str, argv: list[str], scale: int) -> tuple[list[tuple[str, dict]], str | None]:
    """program_launches of the program with its size variable times `scale` (as the GPU ran it)."""
    if scale == 1:
        return program_launches(path, argv)
    import tempfile

    from benchmarks.device_program_kernels import scaled_source
    src = open(os.path.join(ROOT, path)).read()
    old_n = os.environ.get("PKB_TEST_N")
    with tempfile.TemporaryDirectory() as tmp:
        if "PKB_TEST_N" in src:
            os.environ["PKB_TEST_N"] = str(1024 * scale)
        else:
            src = scaled_source(path, scale)[0]
        copy = os.path.join(tmp, os.path.basename(path))
        with open(copy, "w") as f:
            f.write(src)
        try:
            return program_launches(copy, argv)
        finally:
            if old_n is None:
                os.environ.pop("PKB_TEST_N", None)
            else:
                os.environ["PKB_TEST_N"] = old_n


def records(out_path: str, only: str | None = None) -> None:
    """pkb's side alone, no GPU data needed: the device-kernel launch records of every program of
    benchmarks/device_program_kernels.py at world size 1, at its own size and with its size variable times SCALE,
    written to `out_path` (updated after each; a second call fills in what is missing). The PTX interpreter
    takes minutes a program on a loaded 2-core machine, so `programs` reads these instead of simulating again."""
    import time

    from benchmarks.device_program_kernels import CUDA_PROGRAMS, SCALE, TRITON_PROGRAMS, scaled_source
    doc = json.load(open(out_path)) if os.path.exists(out_path) else {"scale": SCALE, "programs": {}}
    todo = [(p, a, 1) for p, a in TRITON_PROGRAMS + CUDA_PROGRAMS]
    todo += [(p, a, SCALE) for p, a in TRITON_PROGRAMS + CUDA_PROGRAMS
             if "PKB_TEST_N" in open(os.path.join(ROOT, p)).read() or scaled_source(p, SCALE)]
    if only == "solutions":   # the solutions' traces (full-size shape runs, minutes on a loaded machine)
        from benchmarks.device_program_kernels import SOLUTIONS
        sols = doc.setdefault("solutions", {})
        for slug, cand in SOLUTIONS:
            cand = cand or f"tasks/solutions/{slug}.py"
            if f"{slug} {cand}" in sols:
                continue
            t0 = time.time()
            try:
                trace, how = solution_trace(slug, cand)
                sols[f"{slug} {cand}"] = {"trace": trace, "how": how}
            except Exception as e:
                how = f"no trace: {e!r}"[:300]
            print(f"{slug} {cand}: {how}, {time.time() - t0:.0f} s", flush=True)
            with open(out_path + ".tmp", "w") as f:
                json.dump(doc, f)
            os.replace(out_path + ".tmp", out_path)
        return
    if only == "own":   # the own-size runs alone (the ones the GPU table compares)
        todo = [t for t in todo if t[2] == 1]
    if only and "/" in only:   # "k/n": this worker's share (each worker writes its own file; merge them after);
        if only.startswith("s"):   # "sk/n": of the x SCALE runs alone
            todo, only = [t for t in todo if t[2] > 1], only[1:]
        k, n = map(int, only.split("/"))
        todo = todo[k::n]
    for path, argv, scale in todo:
        key = record_key(path, argv, scale)
        if key in doc["programs"]:
            continue
        t0 = time.time()
        try:
            launches, why = program_launches_at(path, argv, scale)
        except Exception as e:
            launches, why = [], f"pkb could not run it: {e!r}"[:300]
        doc["programs"][key] = {"launches": launches, "why": why, "wall_s": round(time.time() - t0, 1)}
        print(f"{key}: {len(launches)} launches, {time.time() - t0:.0f} s{'  ' + why if why else ''}", flush=True)
        with open(out_path + ".tmp", "w") as f:
            json.dump(doc, f)
        os.replace(out_path + ".tmp", out_path)


def record_key(path: str, argv: list[str], scale: int) -> str:
    return " ".join([path, *argv, f"x{scale}"])


def cached_launches(path: str, simulate_missing: bool):
    """A `simulate` for program_rows that reads the records file; a launch it lacks is simulated now if
    `simulate_missing`, else that row is left out with how to add it."""
    doc = json.load(open(path))

    def simulate(prog: str, argv: list[str], scale: int):
        got = doc["programs"].get(record_key(prog, argv, scale))
        if got is None:
            if simulate_missing:
                return program_launches_at(prog, argv, scale)
            return [], (f"no pkb record of it in {os.path.relpath(path, ROOT)} (add the missing ones, resumably: "
                        f"device_kernel_model_check.py records {os.path.relpath(path, ROOT)}; or pass --simulate-missing)")
        return [tuple(x) for x in got["launches"]], got["why"]
    return simulate


def program_rows(doc: dict, topo, model, simulate=program_launches_at) -> tuple[list[dict], list[str]]:
    """Per (program, size, kernel): measured and predicted device time (medians over its launches) and the
    error; and a line for each program or kernel left out, with why. A program measured at its own size is
    simulated at that size; one measured with its size variable times `scale` is predicted from the own-size
    simulation scaled by the cost stage's rule (pkbsim.timing.trace_scale.scale_device: data times `scale`,
    the grid as the GPU's launches of the two runs say), as the screen predicts full size."""
    from pkbsim.timing.device_kernel import kernel_time
    from pkbsim.timing.trace_scale import scale_device
    rows, skipped, sims = [], [], {}
    progs = doc.get("programs", [])
    for prog in progs:
        path, argv, scale = prog["program"], prog.get("argv", []), int(prog.get("scale", 1))
        label = " ".join([os.path.basename(path)[:-3], *argv]) + (f" x{scale}" if scale > 1 else "")
        gpu = [k for k in prog.get("gpu", []) if k.get("cat") == "kernel" and k.get("dur") is not None]
        if prog.get("error"):
            skipped.append(f"{label}: not measured cleanly on the GPU ({prog['error'][-160:]})")
            continue
        own = None
        if scale > 1:
            first = next((p for p in progs if p["program"] == path and int(p.get("scale", 1)) == 1
                          and not p.get("error")), None)
            own = [k for k in first.get("gpu", []) if k.get("cat") == "kernel"] if first else None

        def sim(sc):
            key = (path, tuple(argv), sc)
            if key not in sims:
                try:
                    sims[key] = simulate(path, argv, sc)
                except Exception as e:   # a simulator failure is reported, not fatal to the table
                    sims[key] = ([], f"pkb could not run it: {e!r}"[:200])
            return sims[key]
        launches, why = sim(scale)
        if why:
            skipped.append(f"{label}: pkb's run did not end cleanly ({why})")
            continue
        small = {n for n, _ in sim(1)[0]} if scale > 1 and own else set()
        names = {n for n, _ in launches}
        stray = sorted({base_name(k["name"]) for k in gpu if base_name(k["name"]) not in names
                        and not TORCH_KERNEL.search(k["name"])})
        if stray:   # a kernel of the program's own that pkb did not record under that name
            skipped.append(f"{label}: GPU kernels pkb recorded under no such name: {', '.join(stray)[:300]}")
        for name in dict.fromkeys(n for n, _ in launches):
            devs = [d for n, d in launches if n == name]
            got = [k for k in gpu if base_name(k["name"]) == name]
            if not got:
                skipped.append(f"{label}: {name}: no GPU launch of that name")
                continue
            times = [kernel_time(topo, d, model, remote_hop_us=0.0) for d in devs]
            measured = statistics.median(k["dur"] for k in got)
            predicted = statistics.median(t.total_us for t in times)
            row = {"program": label, "kernel": name, "kind": kind_of(path), "scale": scale,
                   "launches": [len(got), len(devs)], "blocks": [math.prod(got[0].get("grid") or [1]), devs[0].get("blocks")],
                   "threads": devs[0].get("threads"), "measured_us": round(measured, 2),
                   "predicted_us": round(predicted, 2), "error": round((predicted - measured) / measured, 3),
                   "bound": max(times, key=lambda t: t.total_us).bound, "device": devs[0],
                   "parts_us": {k: round(getattr(times[0], k), 3) for k in ("memory_us", "issue_us", "atomic_us",
                                                                            "flags_us")}}
            base = [k for k in own if base_name(k["name"]) == name] if own else []
            small_devs = [d for n, d in sim(1)[0] if n == name] if name in small else []
            if base and small_devs:   # the screen's rule (trace_scale): the own-size record, data and grid x scale;
                # and the same with the grid the GPU launched (the rule's data half alone)
                grid_ratio = math.prod(got[0].get("grid") or [1]) / math.prod(base[0].get("grid") or [1])
                for key, gr in (("rule", scale), ("rule_gpu_grid", grid_ratio)):
                    ruled = statistics.median(kernel_time(topo, scale_device(d, scale, gr), model,
                                                          remote_hop_us=0.0).total_us for d in small_devs)
                    row[f"{key}_predicted_us"] = round(ruled, 2)
                    row[f"{key}_error"] = round((ruled - measured) / measured, 3)
            rows.append(row)
    return rows, skipped


TORCH_KERNEL = re.compile(r"at::native|at::cuda|c10d::|ncclDevKernel|ncclKernel|^Memcpy|^Memset|cutlass|"
                          r"cublas|gemv|gemm|elementwise_kernel|reduce_kernel|fill_kernel")   # torch's and NCCL's own


def kind_of(path: str) -> str:
    src = open(os.path.join(ROOT, path)).read()
    return "cuda" if "load_inline" in src else "triton"


RECORDS = os.path.join(ROOT, "benchmarks", "results", "device_program_kernels_pkb_records.json")


def programs(in_path: str, out_path: str | None, records_path: str | None = None, simulate_missing: bool = False) -> None:
    from pkbsim.timing.host_model import host_model
    from pkbsim.timing.topology import load_topology
    with open(in_path) as f:
        doc = json.load(f)
    topology, calibration = machine(doc.get("gpu", ""))
    topo = load_topology(topology)
    model = host_model(calibration, topo)
    print(f"measured: {doc.get('gpu')}, torch {doc.get('torch')}, triton {doc.get('triton')} (world size 1); "
          f"predicted: {topo.name}, {os.path.relpath(calibration, ROOT)}")
    recs = records_path or RECORDS
    simulate = cached_launches(recs, simulate_missing) if os.path.exists(recs) else program_launches_at
    print(f"pkb's launch records: {os.path.relpath(recs, ROOT) if os.path.exists(recs) else 'simulated now'}")
    rows, skipped = program_rows(doc, topo, model, simulate)
    print(f"{'program':50s} {'kernel':26s} {'blocks':>9s} {'measured':>9s} {'predicted':>9s} {'error':>7s}  bound"
          f"       (screen's rule: own size, data and grid x64)")
    for r in rows:
        rule = f"{r['rule_predicted_us']:9.2f} {100 * r['rule_error']:+6.1f}%" if "rule_error" in r else ""
        print(f"{r['program'][:50]:50s} {r['kernel'][:26]:26s} {r['blocks'][0]:>4}/{r['blocks'][1]:<4} "
              f"{r['measured_us']:9.2f} {r['predicted_us']:9.2f} {100 * r['error']:+6.1f}%  {r['bound']:8s} {rule}")
    summary = summarise(rows)
    for line in summary["lines"]:
        print(line)
    floor = (doc.get("solutions") or {}).get("floor") or {}
    if floor.get("median_us"):
        print(f"a minimal kernel ({floor['op']}) on that GPU: {floor['median_us']:.2f} us device time; the model's "
              f"kernel floor: {model['compute']['min_kernel_us']:.2f} us")
    for line in skipped:
        print("left out:", line)

    cached = json.load(open(recs)).get("solutions") if os.path.exists(recs) else None
    sol_rows, sol_skipped = solution_rows(doc, topo, functools.partial(predicted_ops, calibration=calibration),
                                          cached)
    print(f"\nsolutions at world size 1, per torch op (their kernels' device time) against the replay on {topo.name}:")
    print(f"{'solution':34s} {'op':22s} {'class':6s} {'measured':>9s} {'predicted':>9s} {'error':>7s}  kernels")
    for r in sol_rows:
        print(f"{r['solution'][:34]:34s} {r['op'][:22]:22s} {r['class']:6s} {r['measured_us']:9.1f} "
              f"{r['predicted_us']:9.1f} {100 * r['error']:+6.1f}%  {','.join(dict.fromkeys(r['kernels']))[:60]}")
    sol_summary = {}
    for label, keep in (("solution ops, memory (copies over peer views, elementwise, reductions)",
                         lambda r: r["class"] == "memory"), ("solution ops, GEMM/attention (context)",
                                                            lambda r: r["class"] == "gemm")):
        errs = [abs(r["error"]) for r in sol_rows if keep(r)]
        if errs:
            sol_summary[label] = {"ops": len(errs), "median_abs_error": round(statistics.median(errs), 3),
                                  "max_abs_error": round(max(errs), 3)}
            print(f"{label}: {len(errs)} ops, median |error| {100 * statistics.median(errs):.1f}%, "
                  f"max {100 * max(errs):.1f}%")
    for line in sol_skipped:
        print("left out:", line)
    for what, why in doc.get("excluded", {}).items():
        print(f"out of scope: {what}: {why}")
    if out_path:
        with open(os.path.splitext(out_path)[0] + ".md", "w") as f:   # the tables for docs/timing_model.md
            f.write("| program | kernel | blocks | measured | predicted | error | bound | screen's rule |\n"
                    "|---|---|---|---|---|---|---|---|\n")
            for r in rows:
                rule = f"{100 * r['rule_error']:+.1f}%" if "rule_error" in r else "-"
                f.write(f"| {r['program']} | {r['kernel']} | {r['blocks'][0]} | {r['measured_us']:.2f} us | "
                        f"{r['predicted_us']:.2f} | {100 * r['error']:+.1f}% | {r['bound']} | {rule} |\n")
            f.write("\n" + "\n".join(summary["lines"]) + "\n\n| solution | op | class | measured | predicted | error |"
                    "\n|---|---|---|---|---|---|\n")
            for r in sol_rows:
                f.write(f"| {r['solution']} | {r['op']} | {r['class']} | {r['measured_us']:.1f} us | "
                        f"{r['predicted_us']:.1f} | {100 * r['error']:+.1f}% |\n")
        with open(out_path, "w") as f:
            json.dump({"gpu": doc.get("gpu"), "torch": doc.get("torch"), "triton": doc.get("triton"),
                       "topology": topo.name, "summary": summary["numbers"], "rows": rows, "left_out": skipped,
                       "solutions": {"summary": sol_summary, "rows": sol_rows, "left_out": sol_skipped,
                                     "floor": floor}, "excluded": doc.get("excluded", {})}, f, indent=1)


GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm", "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
            "_efficient_attention_forward", "scaled_dot_product_attention", "fused_all_gather_matmul",
            "fused_matmul_reduce_scatter"}
WINDOW = 12   # GPU launches a predicted op may skip to find its own (kernels pkb does not record: fills, the harness)


def op_chains(row: dict) -> list[dict]:
    """Each GPU activity of a profiled call with the names of the torch ops around its launch, innermost first
    (`aten::` dropped), and those ops' identities (to keep one op's kernels together)."""
    cpu = sorted(row.get("cpu_ops", []), key=lambda o: (o["tid"], o["ts"], -(o["dur"] or 0)))
    parent, stack = {}, {}
    for i, o in enumerate(cpu):
        st = stack.setdefault(o["tid"], [])
        while st and cpu[st[-1]]["ts"] + (cpu[st[-1]]["dur"] or 0) < o["ts"] + (o["dur"] or 0):
            st.pop()
        parent[i] = st[-1] if st else None
        st.append(i)
    by_ext = {o["ext"]: i for i, o in enumerate(cpu) if o.get("ext") is not None}
    out = []
    for e in sorted(row.get("gpu", []), key=lambda e: e["ts"] or 0):
        chain, i = [], by_ext.get(e.get("ext"))
        while i is not None:
            chain.append((cpu[i]["name"].split("::")[-1], i))
            i = parent[i]
        out.append({"name": e["name"], "dur": e["dur"] or 0.0, "cat": e["cat"], "chain": chain})
    return out


def match_ops(predicted: list[dict], measured: list[dict]) -> tuple[list[tuple], list, list]:
    """Pair each predicted op (in issue order) with the GPU launches of the same torch op instance, the next one
    within WINDOW launches whose op chain holds its name; (pairs, predicted ops not found, launches left)."""
    pairs, missed, left, j = [], [], [], 0
    for p in predicted:
        hit = None
        for jj in range(j, min(j + WINDOW, len(measured))):
            inst = next((c for c in measured[jj]["chain"] if c[0] == p["name"]), None)
            if inst is None and not measured[jj]["chain"] and base_name(measured[jj]["name"]) == p["name"]:
                inst = (p["name"], None)
            if inst is not None:
                hit = (jj, inst)
                break
        if hit is None:
            missed.append(p)
            continue
        jj, inst = hit
        left += measured[j:jj]
        group, k = [measured[jj]], jj + 1
        while inst[1] is not None and k < len(measured) and inst in measured[k]["chain"]:
            group.append(measured[k])
            k += 1
        pairs.append((p, group))
        j = k
    return pairs, missed, left + measured[j:]


def solution_trace(slug: str, candidate: str) -> tuple[dict, str]:
    """pkb's trace of one call of the solution at world size 1 and the task's full size, as `pkb screen` takes
    it (a full-size shape run; for a Triton or inline-CUDA candidate its screen-size run scaled by the
    reference's byte ratio), and how it was got."""
    import importlib.util

    from pkbsim.screen.cost import shape_trace
    from pkbsim.timing.trace_scale import moved_bytes, scale_trace
    from tasks.registry import get
    task = get(slug)
    path = os.path.join(ROOT, candidate)

    def load():
        spec = importlib.util.spec_from_file_location(f"pkb_cand_{slug}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.solution
    src = open(path).read()
    if "load_inline" in src or "triton.jit" in src:
        screen, why = shape_trace(task, load, 1, 0, "screen", 600)
        ref_full, _ = shape_trace(task, None, 1, 0, "full", 600)
        ref_screen, _ = shape_trace(task, None, 1, 0, "screen", 600)
        if screen is None or ref_full is None or ref_screen is None:
            raise RuntimeError(f"no trace: {why}")
        ratio = moved_bytes(ref_full) / moved_bytes(ref_screen)
        return scale_trace(screen, ratio), f"screen-size run scaled by r = {ratio:.4g}"
    trace, why = shape_trace(task, load, 1, 0, "full", 600)
    if trace is None:
        raise RuntimeError(f"the full-size shape run failed: {why}")
    return trace, "full-size shape run"


def predicted_ops(slug: str, candidate: str, topo, cached: dict | None = None, *,
                  calibration: str) -> tuple[list[dict], str]:
    """The solution's compute ops on rank 0, each timed by the replay on `topo` with that GPU's `calibration`
    (the trace from `cached`, the records file, when it holds it), and how the trace was got."""
    from pkbsim.timing.replay import Replay
    got = (cached or {}).get(f"{slug} {candidate}")
    trace, how = (got["trace"], got["how"]) if got else solution_trace(slug, candidate)
    res = Replay(topo, trace, calibration=calibration).run()
    ops = [{"name": k.name, "kind": k.kind, "us": k.end - k.start, "flops": k.args.get("flops", 0),
            "bytes": k.args.get("bytes", 0), "bound": k.args.get("bound")}
           for k in res.replay.kernels if k.rank == 0 and k.kind == "compute"]
    return ops, how


def solution_rows(doc: dict, topo, predict, cached: dict | None = None) -> tuple[list[dict], list[str]]:
    """Per torch op of each solution's call: measured device time (its kernels' sum) against the replay's."""
    rows, skipped = [], []
    sol = doc.get("solutions") or {}
    for r in sol.get("rows", []):
        label = r["task"] + ("" if (r.get("candidate") or "").startswith("tasks/solutions/") else
                             f" ({os.path.basename(r.get('candidate') or '')})")
        if r.get("error"):
            skipped.append(f"{label}: not measured ({r['error'][:160]})")
            continue
        if not r.get("full"):
            skipped.append(f"{label}: measured at {r.get('size')}, not the full size pkb predicts")
            continue
        try:
            ops, how = predict(r["task"], r["candidate"], topo, cached)
        except Exception as e:
            skipped.append(f"{label}: pkb could not trace it ({e!r}"[:220] + ")")
            continue
        pairs, missed, left = match_ops(ops, op_chains(r))
        for p, group in pairs:
            measured = sum(g["dur"] for g in group)
            if measured <= 0:
                continue
            cls = "gemm" if p["name"] in GEMM_OPS else "memory"
            rows.append({"solution": label, "op": p["name"], "class": cls, "how": how,
                         "kernels": [base_name(g["name"]) for g in group], "measured_us": round(measured, 2),
                         "predicted_us": round(p["us"], 2), "error": round((p["us"] - measured) / measured, 3),
                         "bytes": p["bytes"], "flops": p["flops"]})
        if missed:
            skipped.append(f"{label}: pkb ops with no GPU launch found: " +
                           ", ".join(f"{p['name']} ({p['us']:.1f} us)" for p in missed))
        work = [g for g in left if g["cat"] == "kernel"]
        if work:
            skipped.append(f"{label}: GPU kernels no pkb op claimed: " + ", ".join(
                f"{base_name(g['name'])[:40]} [{'/'.join(c[0] for c in g['chain'][:2]) or '-'}] ({g['dur']:.1f} us)"
                for g in work[:12]) + (f" and {len(work) - 12} more" if len(work) > 12 else ""))
    return rows, skipped


def summarise(rows: list[dict]) -> dict:
    """Median and largest |error|, over all kernels and per kind."""
    lines, numbers = [], {}
    for label, keep in (("all", lambda r: True), ("own size", lambda r: r["scale"] == 1),
                        ("scaled", lambda r: r["scale"] > 1), ("triton", lambda r: r["kind"] == "triton"),
                        ("cuda", lambda r: r["kind"] == "cuda")):
        errs = [abs(r["error"]) for r in rows if keep(r)]
        if errs:
            numbers[label] = {"kernels": len(errs), "median_abs_error": round(statistics.median(errs), 3),
                              "max_abs_error": round(max(errs), 3)}
            lines.append(f"{label}: {len(errs)} kernels, median |error| {100 * statistics.median(errs):.1f}%, "
                         f"max {100 * max(errs):.1f}%")
    for label, key in (("scaled, by the screen's rule from the own-size record", "rule_error"),
                       ("scaled, by that rule with the grid the GPU launched", "rule_gpu_grid_error")):
        errs = [abs(r[key]) for r in rows if key in r]
        if errs:
            numbers[label] = {"kernels": len(errs), "median_abs_error": round(statistics.median(errs), 3),
                              "max_abs_error": round(max(errs), 3)}
            lines.append(f"{label}: {len(errs)} kernels, median |error| {100 * statistics.median(errs):.1f}%, "
                         f"max {100 * max(errs):.1f}%")
    return {"lines": lines, "numbers": numbers}


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("measure", "compare", "programs", "records"):
        sys.exit(__doc__)
    if sys.argv[1] == "measure":
        measure(sys.argv[2])
    elif sys.argv[1] == "records":
        records(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    elif sys.argv[1] == "programs":
        flags = [a for a in sys.argv[3:] if a.startswith("--")]
        rest = [a for a in sys.argv[3:] if not a.startswith("--")]
        recs_flag = next((a.split("=", 1)[1] for a in flags if a.startswith("--records=")), None)
        programs(sys.argv[2], rest[0] if rest else None, recs_flag, "--simulate-missing" in flags)
    else:
        compare(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
