"""`pkb tasks validate`: every check a task must pass before it enters the suite.

Per supported world size among 2, 4 and 8 (or, for a task whose minimum is above them, such as the
inter-node tasks, at its smallest supported world size), on the simulated world at `screen` size:
- the reference runs on two trials, and its outputs have the declared count, dtypes and shapes;
- inputs are random: no constant float tensor, different per rank, different per trial;
- it is deterministic for a seed;
- degenerate candidates fail: the reference with all communication skipped (each rank keeps its local
  contribution), and all-zero outputs;
- the tolerance is honest: a result rounded to bf16 passes exactly where the tolerance admits bf16;
- it runs in about a second.
And once, at the largest world size: the `full` preset runs as a shape run (or needs real values).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pkbsim.taskrun import TaskRun, mismatches, run_task
from tasks.api import flat_tensors
from tasks.registry import TaskSpec

SCREEN_SECONDS = 5.0  # a screen-size run should take about a second; beyond this it fails


@dataclass
class Check:
    name: str
    world_size: int | None
    ok: bool
    message: str = ""
    timed: bool = False  # depends on this machine's load: reported by `pkb tasks validate`, not asserted in tests

    def to_json(self) -> dict:
        return {"check": self.name, "world_size": self.world_size, "ok": self.ok, "message": self.message}


def _same(a, b) -> bool:
    ta, tb = flat_tensors(a), flat_tensors(b)
    return len(ta) == len(tb) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(ta, tb))


def _run_failed(run: TaskRun) -> str:
    f = run.result.findings
    return f"{run.result.verdict}: {f[0].message}" if f else run.result.verdict


def check_world_size(task: TaskSpec, n: int, seed: int) -> list[Check]:
    checks: list[Check] = []
    t0 = run_task(task, None, n, seed=seed, trial=0)
    if not t0.ok:
        return [Check("reference runs", n, False, _run_failed(t0))]
    t1 = run_task(task, None, n, seed=seed, trial=1)
    checks.append(Check("reference runs", n, t1.ok, "" if t1.ok else _run_failed(t1)))
    if not t1.ok:
        return checks

    problems = []
    for rank, outs in enumerate(t0.outputs):
        if len(outs) != len(task.outputs):
            problems.append(f"rank {rank} returned {len(outs)} outputs, OUTPUTS declares {len(task.outputs)}")
            continue
        for spec, o, o1 in zip(task.outputs, outs, t1.outputs[rank]):
            if not isinstance(o, torch.Tensor) or o.dtype != spec.dtype:
                problems.append(f"rank {rank} {spec.name}: {getattr(o, 'dtype', type(o))} != declared {spec.dtype}")
            elif spec.shape is not None and tuple(o.shape) != tuple(spec.shape(task.sizes["screen"], n, rank)):
                problems.append(f"rank {rank} {spec.name}: shape {tuple(o.shape)} != declared "
                                f"{tuple(spec.shape(task.sizes['screen'], n, rank))}")
            elif o.shape != o1.shape:
                problems.append(f"rank {rank} {spec.name}: shape differs between trials")
    checks.append(Check("outputs as declared", n, not problems, "; ".join(problems[:3])))

    problems = []
    for rank, ins in enumerate(t0.inputs):
        for i, t in enumerate(flat_tensors(ins)):
            if t.is_floating_point() and t.numel() > 1 and bool((t == t.reshape(-1)[0]).all()):
                problems.append(f"rank {rank} input {i} is constant")
        if _same(ins, t1.inputs[rank]):
            problems.append(f"rank {rank}: inputs identical across trials")
    if _same(t0.inputs[0], t0.inputs[1]):
        problems.append("ranks 0 and 1 have identical inputs")
    checks.append(Check("inputs random per rank and trial", n, not problems, "; ".join(problems[:3])))

    again = run_task(task, None, n, seed=seed, trial=0)
    det = again.ok and all(_same(a, b) for a, b in zip(again.outputs, t0.outputs))
    checks.append(Check("deterministic", n, det, "" if det else "a second run with the same seed differs"))

    skipped = run_task(task, None, n, seed=seed, trial=0, no_comm=True)
    caught = not skipped.ok or bool(mismatches(task, skipped.outputs, t0.outputs))
    checks.append(Check("skipping communication fails", n, caught,
                        "" if caught else "the reference without communication passes the comparison"))

    zeros = [tuple(torch.zeros_like(o) for o in outs) for outs in t0.outputs]
    caught = bool(mismatches(task, zeros, t0.outputs))
    checks.append(Check("all-zero outputs fail", n, caught, "" if caught else "zeros pass the comparison"))

    problems = []
    for k, spec in enumerate(task.outputs):
        if not spec.dtype.is_floating_point:
            continue
        rounded = [tuple(o.to(torch.bfloat16).to(o.dtype) if j == k else o for j, o in enumerate(outs))
                   for outs in t0.outputs]
        passes = not mismatches(task, rounded, t0.outputs)
        if passes != spec.admits_bf16:
            problems.append(f"{spec.name}: a bf16-rounded result {'passes' if passes else 'fails'} but the "
                            f"tolerance (rtol={spec.tolerance[0]:g}, atol={spec.tolerance[1]:g}) says it should "
                            f"{'fail' if passes else 'pass'}" + (" (atol too loose for the data's scale?)"
                                                                 if passes else ""))
    checks.append(Check("tolerance consistent with bf16 rounding", n, not problems, "; ".join(problems)))

    slow = max(t0.result.wall_s, t1.result.wall_s)
    checks.append(Check(f"screen run under {SCREEN_SECONDS:g} s", n, slow < SCREEN_SECONDS, f"{slow:.2f} s",
                        timed=True))
    return checks


def check_full_size(task: TaskSpec, n: int, seed: int) -> Check:
    run = run_task(task, None, n, seed=seed, preset="full", timeout=300)
    if run.ok:
        return Check("full size runs as a shape run", n, True, f"{run.result.wall_s:.2f} s")
    msg = _run_failed(run)
    data_dependent = "DataDependentOutput" in msg or "data-dependent" in msg.lower()
    return Check("full size runs as a shape run", n, data_dependent,
                 "needs real values (falls back to scaled runs)" if data_dependent else msg)


def validation_sizes(task: TaskSpec, world_sizes=(2, 4, 8)) -> list[int]:
    """The world sizes among `world_sizes` the task supports; a task whose minimum lies above all of them
    (inter-node tasks start at 16 ranks) is checked at its smallest supported size instead."""
    sizes = [n for n in world_sizes if task.supports(n)]
    lo = task.world_sizes.min
    if sizes or lo <= max(world_sizes):
        return sizes
    return [n for n in range(lo, 8 * lo + 1) if task.supports(n)][:1]


def validate(task: TaskSpec, world_sizes=(2, 4, 8), seed: int = 1234, full: bool = True) -> list[Check]:
    sizes = validation_sizes(task, world_sizes)
    if not sizes:
        return [Check("supports a world size among " + ", ".join(map(str, world_sizes)), None, False,
                      f"WORLD_SIZES is {task.world_sizes.describe()}")]
    checks = [c for n in sizes for c in check_world_size(task, n, seed)]
    if full:
        checks.append(check_full_size(task, max(sizes), seed))
    return checks
