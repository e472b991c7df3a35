"""Stage 3: predicted time of reference and candidate on a modelled machine.

Both run again as full-size shape runs (FakeTensorMode: shapes, FLOPs and bytes, no data), the candidate in
its own process (candidate_side.py), the reference here, and the timing engine replays both traces on the
topology. A program that needs real values at full size (`.item()`, data-dependent shapes) or that the shape
run cannot carry runs at full size with data instead where its task's runs are under budgets (a
ParallelKernelBench problem: 1024 x 1024 at full size, inputs and reference FLOPs bounded; seconds for most,
as long as the functional stage for a problem of fixed size); else it falls back to the screen-size
traces the functional stage recorded: such a prediction is marked uncertain, and an uncertain prediction never
rejects on its own.
"""
from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from pkbsim.screen.candidate import Session
from pkbsim.screen.parallelkernelbench import budgeted
from pkbsim.screen.result import Prediction
from pkbsim.taskrun import Call, run_calls
from pkbsim.timing import chrome_trace
from pkbsim.timing.topology import Topology
from pkbsim.timing.trace_scale import moved_bytes, scale_trace
from tasks.registry import TaskSpec

if TYPE_CHECKING:
    from pkbsim.screen.candidate_side import CandidateReport

SHAPE_RUN_SECONDS = 60.0  # shape runs move no data: one that takes longer is stuck, not slow
DATA_RUN_SECONDS = 120.0  # a full-size run with data (a budgeted task's, where the shape run cannot go)
LATENCY_BYTES = 256 << 10  # communication kernels moving less than this are latency-, not link-bound
KERNEL_BOUNDS = {"link": "link", "flags": "waits"}   # else its FLOPs, memory, issue or atomics: compute-bound
LABELS = {"compute": "compute-bound", "link": "link-bound", "latency": "latency/launch-bound",
          "launch": "latency/launch-bound", "waits": "serialised waits"}


def shape_trace(task: TaskSpec, load, world_size: int, seed: int, preset: str, timeout: float):
    """(trace, why not) of one side (`load` None: the reference) from one run of the world: a warm-up call,
    then the timed one (as hardware timing does: buffers a candidate caches are allocated before it). Where
    the shape run fails and the task is budgeted, the same calls run with data (the trace says `with_data`)."""
    trace, why = _traced_run(task, load, world_size, seed, preset, timeout, shape_run=None)
    if trace is not None or not budgeted(task):
        return trace, why
    data, again = _traced_run(task, load, world_size, seed, preset, DATA_RUN_SECONDS, shape_run=False)
    if data is None:
        return None, why if again == why else f"{why}; with data: {again}"
    data["with_data"] = why
    return data, ""


def _traced_run(task: TaskSpec, load, world_size: int, seed: int, preset: str, timeout: float,
                shape_run: bool | None):
    calls = [Call(1, load=load), Call(0, load=load)]
    run = run_calls(task, calls, world_size, seed=seed, preset=preset, timeout=timeout, record_compute=True,
                    keep_inputs=False, shape_run=shape_run)
    if run.result.verdict != "ok" or not all(c.complete for c in run.calls):
        f = run.result.findings
        return None, f[0].message if f else run.result.verdict
    return run.calls[1].trace(task, preset), ""


def predict(task: TaskSpec, source: Session, cand: CandidateReport, ref_screen_trace: dict | None, world_size: int,
            topo: Topology, seed: int, timeout: float, timeline: str | None = None,
            ref_shape: tuple | None = None) -> Prediction:
    """Runs in the screening process: the reference's full-size trace is taken here (or given: `ref_shape`,
    (trace or None, why not)); the candidate's traces come from its own process (`cand`)."""
    notes: list[str] = []
    uncertain = True
    device = "Triton" if source.mentions("triton.jit") else "inline-CUDA" if cand.compile else None
    if device is None and cand.shape_trace is None:
        notes.append(f"the full-size shape run failed ({cand.shape_why}); predicted at screen size instead")
    else:
        ref, why = ref_shape or shape_trace(task, None, world_size, seed, "full", min(timeout, SHAPE_RUN_SECONDS))
        ratio = _ratio(ref, ref_screen_trace) if ref is not None and ref_screen_trace is not None else None
        if ref is not None and _untimed_kernels(ref):
            # the reference's own device kernels did not run in its shape run: timed by the candidate's rule, or
            # it would be timed without them against a candidate timed with them (a reference slower than itself)
            if ratio is None:
                ref, why = None, "its device kernels cannot run in a shape run"
            else:
                ref = scale_trace(ref_screen_trace, ratio)
                notes.append(f"the reference launches device kernels, which a shape run cannot execute: its "
                             f"screen-size trace is scaled to full size by r = {ratio:.4g}, as a candidate's is")
        if ref is None:
            notes.append(f"the reference's full-size shape run failed ({why}); predicted at screen size instead")
        elif device is None:
            uncertain, cand_trace = False, cand.shape_trace
        elif ratio is not None and cand.screen_trace is not None:
            uncertain, cand_trace = False, scale_trace(cand.screen_trace, ratio)
            notes.append(f"the candidate launches {device} kernels, which a shape run cannot execute (no data): its "
                         f"screen-size trace is scaled to full size by r = {ratio:.4g} (the reference's bytes at full "
                         f"over screen size): bytes, FLOPs, each kernel's loads, atomics and instructions, and its "
                         f"grid, times r; flag hops and waits unchanged")
    if uncertain:
        ref, cand_trace = ref_screen_trace, cand.screen_trace
        if ref is None or cand_trace is None:
            raise RuntimeError("no trace to time: the functional stage recorded none")
    for trace, who in ((ref, "reference"), (cand_trace, "candidate")):
        if trace.get("with_data"):
            notes.append(f"the {who}'s full-size shape run failed ({trace['with_data']}): it ran at full size with "
                         f"data instead")
    # imported here: the flow model and SciPy behind it cost 0.27 s of every screening process's start
    # (python -X importtime), and most screens end before this stage (a reject, --no-cost)
    from pkbsim.timing.replay import Replay
    cand_res = Replay(topo, cand_trace).run()
    ref_res = Replay(topo, ref).run()
    untimed = sorted({op["kernel"] for r in cand_trace["ranks"] for op in r["ops"] if op["kind"] == "device"})
    if untimed:
        uncertain = True
        notes.append(f"device kernels {', '.join(untimed)} are not timed by the model; the prediction leaves them out")
    for res, who in ((ref_res, "reference"), (cand_res, "candidate")):
        notes += [f"{who}: {n}" for n in res.notes]
        uncertain |= bool(res.unfinished)
    if timeline:
        chrome_trace.write(timeline, cand_res)
    label, shares = bottleneck(cand_res)
    speedup = ref_res.makespan_us / cand_res.makespan_us if cand_res.makespan_us > 0 else float("inf")
    return Prediction(ref_res.makespan_us, cand_res.makespan_us, speedup, label, uncertain, notes, shares,
                      cand_res.critical_path[-6:])


def _ratio(full: dict, screen: dict) -> float | None:
    """r: the reference's bytes at full over screen size, counting what both runs executed (a shape run leaves
    device kernels out); None when the screen-size run moved nothing else."""
    def host_bytes(doc: dict) -> int:
        return moved_bytes({"ranks": [{"ops": [op for op in r["ops"] if op["kind"] != "device" and "device" not in op]}
                                      for r in doc["ranks"]]})
    below = host_bytes(screen)
    return host_bytes(full) / below if below else None


def _untimed_kernels(trace: dict) -> bool:
    """Whether a shape run met device kernels it could not execute (no data), which its trace leaves out."""
    return any(op["kind"] == "device" for r in trace["ranks"] for op in r["ops"])


def bottleneck(res) -> tuple[str, dict]:
    """What the critical path of a replay spends its time on: the largest class names the bottleneck."""
    total = res.makespan_us
    if total <= 0:
        return "latency/launch-bound", {}
    busy: dict = defaultdict(float)
    for k in res.critical_path:
        dur = k["end_us"] - k["start_us"]
        if k["kind"] == "compute":   # a kernel whose peer traffic outlasted its work is link-bound (the replay)
            busy[KERNEL_BOUNDS.get(k.get("bound"), "compute")] += dur
        elif k["kind"] == "signal_wait":
            busy["waits"] += dur
        elif k.get("bound") == "compute":   # a fused GEMM that hid its collective
            busy["compute"] += dur
        elif k["kind"] in ("collective", "p2p", "signal_put"):
            busy["link" if k.get("bytes", 0) >= LATENCY_BYTES else "latency"] += dur
    busy["launch"] = max(0.0, total - sum(busy.values()))
    shares = {k: round(v / total, 3) for k, v in busy.items()}
    merged = defaultdict(float)
    for k, v in shares.items():
        merged[LABELS[k]] += v
    return max(merged, key=merged.get), shares
