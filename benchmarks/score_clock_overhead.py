"""What the scorer's clock adds to a call: ParallelKernelBench references at world size 1, each timed three
ways in one process on the same device, with the scorer's own worker code:

- `single`: one call at a time, from a barrier-aligned start to a device sync plus barrier (`Worker.call`,
  how pkb timed every call before batches; correctness trials still run so);
- `batch`: calls back to back on fresh inputs, one timed region per batch (`Worker.run_batch`, how pkb
  times now), as many calls as the scorer would choose (`batch_size.calls_per_batch` on `Worker.warmup`);
- `graph` (nccl): the batch captured in one CUDA graph and timed as one replay (`Worker.capture`, `pkb score
  --graphs`), as many calls as the scorer would then choose; where the capture fails, why;
- `harness`: ParallelKernelBench's own timing function from the checkout (`utils/performance.py`: one event
  pair around back-to-back calls on cycled input copies), where the checkout has it.

Per problem the median of each (ms per call) and the two overheads against the harness; the references whose
batch time lies in [--lo, --hi] ms are listed last (the self-scores' sample). The same rows as JSON with
--out. No asserts: a measurement.
Usage (GPU): python benchmarks/score_clock_overhead.py --pkb-root CHECKOUT [--problems 1 2 ...] [--out F]
(gloo on the CPU works too, for a dry run at the screen size: --backend gloo --preset screen)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

from hwbackend.batch_size import WarmupReport, calls_per_batch  # noqa: E402
from hwbackend.worker import Worker  # noqa: E402
from tasks.parallelkernelbench.checkout import register_checkout  # noqa: E402
from tasks.parallelkernelbench.naming import Checkout  # noqa: E402
from tasks.registry import get  # noqa: E402


def _worker(backend: str, preset: str, checkout: str, first_task: str) -> Worker:
    scratch = tempfile.mkdtemp(prefix="pkb-clock-")
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29533",
                      PKB_ROLE="reference", PKB_BACKEND=backend, PKB_OUT=scratch, PKB_STATUS=scratch,
                      PKB_CHECKOUT=checkout, PKB_CHECKOUT_DTYPE="bfloat16", PKB_TASK=first_task, PKB_PRESET=preset)
    return Worker(None)


def _harness(root: str):
    path = os.path.join(root, "utils", "performance.py")
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location("pkb_harness_performance", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.measure_solution_performance


def measure(w: Worker, slug: str, backend: str, harness, seed: int) -> dict:
    task = get(slug)
    w.task, w.fn = task, task.reference
    w.tensor_outputs = all(o.check is None for o in task.outputs)
    seeds = [[seed + 2 * i, seed + 2 * i + 1] for i in range(400)]
    report = WarmupReport.from_reply(w.warmup(seeds[:10]))
    n = calls_per_batch([report], backend)
    single = [w.call(w.inputs(s), check=False)[2] for s in seeds[10:30]]
    batch = []
    for b in range(6):  # the first settles (the allocator's pool grows), as the scorer's does
        staged = w.stage([[seed + 7919 * (b + 1) + 2 * i, seed + 7919 * (b + 1) + 2 * i + 1] for i in range(n)],
                         f"batch {b}")
        outs, seconds = w.run_batch(staged)
        batch += [seconds / n] if b else []
        del outs, staged
    row = {"task": slug, "calls_per_batch": n, "input_mib": report.input_bytes / 2**20,
           "single_ms": statistics.median(single) * 1e3, "batch_ms": statistics.median(batch) * 1e3,
           "batch_spread": (max(batch) - min(batch)) / statistics.median(batch)}
    if backend == "nccl":
        row |= _graphs(w, backend, seeds[:10], seed)
    if harness is not None and backend == "nccl":
        args = w.inputs(seeds[-1])
        first = next(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
        fn = (lambda t: task.reference(*args[:first], t, *args[first + 1:]))
        row["harness_ms"] = statistics.median(
            harness(fn, args[first], warmup_iters=50, measure_iters=100)["wall_time_ms"] for _ in range(3))
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return row


def _graphs(w: Worker, backend: str, warmup: list, seed: int) -> dict:
    """The graph column: calls per batch as the scorer would choose them, ms per call (median of 5 batches after
    one that settles), their spread, and the seconds a batch took to capture and fill; or why not."""
    try:
        n = calls_per_batch([WarmupReport.from_reply(w.warmup(warmup, graph=True))], backend, graphs=True)
        times, staging = [], []
        for b in range(6):
            t0 = time.perf_counter()
            staged = w.capture(n, f"graph batch {b}")
            w.fill(staged, [[seed + 104729 * (b + 1) + 2 * i, seed + 104729 * (b + 1) + 2 * i + 1] for i in range(n)])
            staging.append(time.perf_counter() - t0)
            outs, seconds = w.run_batch(staged)
            times += [seconds / n] if b else []
            del outs, staged
    except Exception as e:  # noqa: BLE001 - a reference that cannot be captured is a row of its own
        torch.cuda.synchronize()
        return {"graph_error": f"{type(e).__name__}: {str(e)[:200]}"}
    return {"graph_calls": n, "graph_ms": statistics.median(times) * 1e3,
            "graph_spread": (max(times) - min(times)) / statistics.median(times), "graph_staging_s": max(staging)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pkb-root", required=True)
    ap.add_argument("--problems", nargs="*", type=int, help="ids (default: all)")
    ap.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    ap.add_argument("--preset", default="full", choices=["screen", "full"])
    ap.add_argument("--lo", type=float, default=0.01, help="ms: the self-scores' sample, from")
    ap.add_argument("--hi", type=float, default=0.1, help="ms: to")
    ap.add_argument("--budget-s", type=float, default=400, help="stop starting problems after this long")
    ap.add_argument("--out")
    args = ap.parse_args()
    root = os.path.abspath(args.pkb_root)
    slugs = register_checkout(Checkout(root, "bfloat16"))
    ids = args.problems or sorted(slugs)
    w = _worker(args.backend, args.preset, root, slugs[ids[0]])
    harness, rows, t0 = _harness(root), [], time.monotonic()
    print(f"{'task':42s} {'calls':>6s} {'single':>9s} {'batch':>9s} {'harness':>9s} {'spread':>7s} "
          f"{'g.calls':>7s} {'graph':>9s} {'g.spread':>8s} {'g.stage':>7s}  (ms per call; s)", flush=True)
    for pid in ids:
        if time.monotonic() - t0 > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: stopped before problem {pid}")
            break
        try:
            row = measure(w, slugs[pid], args.backend, harness, 1000 + pid)
        except Exception as e:  # noqa: BLE001 - one problem's failure is a row, not the end of the table
            row = {"task": slugs[pid], "error": f"{type(e).__name__}: {str(e)[:160]}"}
            torch.cuda.synchronize() if torch.cuda.is_available() else None
        rows.append(row)
        if "error" in row:
            print(f"{row['task']:42s} error: {row['error']}", flush=True)
        else:
            h = f"{row['harness_ms']:9.4f}" if "harness_ms" in row else f"{'-':>9s}"
            g = (f"{row['graph_calls']:7d} {row['graph_ms']:9.4f} {row['graph_spread']:8.1%} "
                 f"{row['graph_staging_s']:7.2f}" if "graph_ms" in row else f"graph: {row.get('graph_error', '-')}")
            print(f"{row['task']:42s} {row['calls_per_batch']:6d} {row['single_ms']:9.4f} {row['batch_ms']:9.4f} "
                  f"{h} {row['batch_spread']:7.1%} {g}", flush=True)
    timed = [r for r in rows if "harness_ms" in r]
    if timed:
        before = statistics.median(r["single_ms"] - r["harness_ms"] for r in timed)
        after = statistics.median(r["batch_ms"] - r["harness_ms"] for r in timed)
        print(f"median overhead against the harness's clock over {len(timed)} problems: single {before * 1e3:.1f} us "
              f"per call, batch {after * 1e3:.1f} us per call")
        graphed = [r for r in timed if "graph_ms" in r]
        if graphed:
            print(f"graph over {len(graphed)} of them: {statistics.median(r['graph_ms'] - r['harness_ms'] for r in graphed) * 1e3:.1f}"
                  f" us per call against the harness's clock; batch over graph time: median "
                  f"{statistics.median(r['batch_ms'] / r['graph_ms'] for r in graphed):.2f}x")
    sample = [r["task"] for r in rows if "batch_ms" in r and args.lo <= r["batch_ms"] <= args.hi]
    print(f"references of {args.lo}-{args.hi} ms by the batch clock ({len(sample)}): {' '.join(sample)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                       "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
