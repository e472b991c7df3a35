"""ParallelKernelBench's own speed-up of solution files, by its own timing function, to set beside `pkb score`'s.

For each file, in one process at world size 1 (NCCL): the problem's reference and the solution, on the inputs
PKB's builder makes at 1024 x 1024 bf16 (trial 0), each timed by the checkout's `utils/performance.py`
(`measure_solution_performance`: 500 warm-up calls, then 100 back to back between one event pair, on cycled
copies of the first input), alternating reference and solution `--rounds` times. A file is consistent when its
rounds' speed-ups lie within 10% of each other (max / min <= 1.1). Prints one JSON line per file; no asserts.
This is the harness's clock, not its launcher: `run_local.py --measure-perf` runs the same function in a
torchrun job per run, which costs about 100 s a file; here the rounds share one process.
Usage (GPU): python benchmarks/harness_speedups.py --pkb-root CHECKOUT FILE [FILE ...]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _timer(fn, args: tuple, measure):
    """ms per call by the harness's function, which substitutes the first tensor argument of each call."""
    first = next(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
    return measure(lambda t: fn(*args[:first], t, *args[first + 1:]), args[first])["wall_time_ms"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pkb-root", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    root = os.path.abspath(args.pkb_root)
    sys.path.insert(0, root)  # solutions import the checkout's utils
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29541"), RANK="0",
                      LOCAL_RANK="0", WORLD_SIZE="1")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    measure = _load(os.path.join(root, "utils", "performance.py"), "pkb_performance").measure_solution_performance
    builder = _load(os.path.join(root, "utils", "input_output_tensors.py"), "pkb_inputs")
    refs = {int(f.split("_")[0]): os.path.join(root, "reference", f) for f in os.listdir(os.path.join(root, "reference"))
            if f[0].isdigit() and f.endswith(".py")}
    for path in args.files:
        pid = int(os.path.basename(path).split("_")[0])
        row = {"file": path, "problem": pid}  # as given: trees share file names
        try:
            ref = _load(refs[pid], f"pkb_ref_{pid}").solution
            sol = _load(path, f"pkb_sol_{pid}").solution
            inputs = builder.create_input_tensor(0, 1, pid, (1024, 1024), torch.bfloat16, 0, torch.device("cuda", 0))
            inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
            ref_ms, sol_ms = [], []
            for _ in range(args.rounds):
                ref_ms.append(_timer(ref, inputs, measure))
                sol_ms.append(_timer(sol, inputs, measure))
            ratios = [r / s for r, s in zip(ref_ms, sol_ms)]
            row |= {"reference_ms": ref_ms, "solution_ms": sol_ms, "speedups": ratios,
                    "median_speedup": statistics.median(ratios), "consistent": max(ratios) / min(ratios) <= 1.1}
        except Exception as e:  # noqa: BLE001 - a file's failure is its row
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        print(json.dumps(row), flush=True)
        torch.cuda.synchronize()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
