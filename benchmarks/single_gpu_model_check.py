"""The compute side of the screen's prediction against one real GPU: every task that runs at world size 1,
its reference and the one-GPU candidates, at full size.

    python benchmarks/single_gpu_model_check.py measure OUT.json    # on the GPU: time and profile each
    python benchmarks/single_gpu_model_check.py compare OUT.json    # here: pkb's prediction next to it

`measure` times each solution with CUDA events (median of 10 calls after 3 warm-up calls, inputs made
once) and lists the kernels one profiled call launches (torch.profiler); it needs only torch and tasks/, as
the GPU machines may lack the simulator's dependencies. `compare` takes the full-size shape-run trace the
screen's cost stage takes (pkbsim.screen.cost.shape_trace) and replays it on the topology of that GPU and prints measured and predicted
time, the error, the kernel counts, and whether the predicted speed-up of each candidate over the
reference points the same way as the measured one (within 5% of 1 counts as a tie).
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys

import torch

TIE = 0.05   # speed-ups this close to 1 are inside one GPU's run-to-run noise at these sizes (docs/scoring.md: 2-19%)
CASES = [  # (task, candidate file or None for the reference)
    ("allreduce_residual_rmsnorm", None),
    ("allreduce_residual_rmsnorm", "tests/gpu_candidates/fused_residual_rmsnorm.py"),
    ("gemm_allreduce_row_parallel", None),
    ("decode_moe_finalize_allreduce_rmsnorm", None),
    ("all_reduce", None),
    ("all_reduce", "tests/gpu_candidates/fast_all_reduce.py"),
]


def _solution(task, path):
    if path is None:
        return task.reference
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.solution


def measure(out_path: str) -> None:
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from cuda_events import event_times_us

    from tasks.api import TaskContext
    from tasks.registry import get
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", RANK="0", WORLD_SIZE="1",
                      NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    rows = []
    for slug, path in CASES:
        task = get(slug)
        fn = _solution(task, path)
        args = task.make_inputs(TaskContext(0, 1, 0, 0, "full", dict(task.sizes["full"]), torch.device("cuda", 0)))
        for _ in range(3):
            fn(*args)
        torch.cuda.synchronize()
        times = event_times_us(fn, args, 10)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn(*args)
            torch.cuda.synchronize()
        kernels = [{"name": e.name, "us": e.device_time} for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA]
        rows.append({"task": slug, "candidate": path, "measured_us": statistics.median(times), "kernels": kernels})
        print(f"{slug:40s} {path or 'reference':50s} {rows[-1]['measured_us']:9.1f} us  {len(kernels)} kernels")
        del args
        torch.cuda.empty_cache()
    dist.destroy_process_group()
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


def compare(path: str) -> None:
    from pkbsim.screen.cost import shape_trace
    from pkbsim.timing.replay import Replay
    from pkbsim.timing.topology import load_topology
    from tasks.registry import get
    with open(path) as f:
        doc = json.load(f)
    topo = load_topology("hgx-h200" if "H200" in doc["gpu"] else "hgx-h100")
    predicted = {}
    print(f"{doc['gpu']}, torch {doc['torch']}; model: {topo.name}")
    print(f"{'task':38s} {'solution':18s} {'measured':>9s} {'predicted':>9s} {'error':>7s} {'kernels':>8s} {'modelled':>8s}")
    for r in doc["rows"]:
        task = get(r["task"])
        trace, why = shape_trace(task, lambda t=task, p=r["candidate"]: _solution(t, p), 1, 0, "full", 120)
        if trace is None:
            sys.exit(f"{r['task']}: the full-size shape run failed ({why})")
        res = Replay(topo, trace).run()   # as `pkb screen` times a candidate
        ops = [op for op in trace["ranks"][0]["ops"] if op["kind"] in ("compute", "collective")]
        predicted[(r["task"], r["candidate"])] = res.makespan_us
        who = os.path.basename(r["candidate"])[:-3] if r["candidate"] else "reference"
        err = 100 * (res.makespan_us / r["measured_us"] - 1)
        print(f"{r['task']:38s} {who:18s} {r['measured_us']:9.1f} {res.makespan_us:9.1f} {err:+6.1f}% "
              f"{len(r['kernels']):8d} {len(ops):8d}")
    for r in doc["rows"]:
        if r["candidate"] is None:
            continue
        ref = next(x for x in doc["rows"] if x["task"] == r["task"] and x["candidate"] is None)
        measured = ref["measured_us"] / r["measured_us"]
        model = predicted[(r["task"], None)] / predicted[(r["task"], r["candidate"])]
        side = [0 if abs(x - 1) < TIE else 1 if x > 1 else -1 for x in (measured, model)]
        verdict = "both a tie" if side == [0, 0] else "same direction" if side[0] == side[1] else "DIFFERENT"
        print(f"speed-up of {os.path.basename(r['candidate'])}: measured {measured:.2f}, predicted {model:.2f}"
              f" ({verdict}; within {TIE:.0%} of 1 is a tie)")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("measure", "compare"):
        sys.exit("usage: single_gpu_model_check.py measure|compare OUT.json")
    (measure if sys.argv[1] == "measure" else compare)(sys.argv[2])
