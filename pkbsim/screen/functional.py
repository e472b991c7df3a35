"""Stage 2: reference and candidate on the simulated world at `screen` size, same inputs, two trials.

Protocol findings (deadlock, mismatch, signal errors, exceptions) and wrong outputs reject. The
reference's runs are cached per process, so a batch screens each task's reference once.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pkbsim.screen.candidate import Session, loader
from pkbsim.screen.result import Reason
from pkbsim.taskrun import TaskRun, mismatches, run_task
from pkbsim.world.findings import is_fatal
from tasks.registry import TaskSpec

TRIALS = 2
_reference_runs: dict = {}


class ReferenceFailed(Exception):
    """The task's own reference does not run on the simulated world: a bug of pkb or of the task."""


@dataclass
class Functional:
    reasons: list[Reason] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    correct: bool | None = None
    not_simulated: bool = False


def reference_run(task: TaskSpec, world_size: int, seed: int, trial: int, timeout: float) -> TaskRun:
    key = (task.slug, world_size, seed, trial)
    run = _reference_runs.get(key)
    if run is None:
        run = run_task(task, None, world_size, seed=seed, trial=trial, timeout=timeout)
        if not run.ok:
            f = run.result.findings
            raise ReferenceFailed(f"the reference of {task.slug} fails on the simulated world at {world_size} ranks: "
                                  f"{f[0].message if f else run.result.verdict}")
        _reference_runs[key] = run
    return run


def functional(task: TaskSpec, session: Session, world_size: int, seed: int, timeout: float) -> Functional:
    out = Functional()
    load = loader(session, task.reference)
    for trial in range(TRIALS):
        ref = reference_run(task, world_size, seed, trial, timeout)
        cand = run_task(task, None, world_size, seed=seed, trial=trial, timeout=timeout, load=load, poison=True)
        out.findings += [dict(f.to_json(), trial=trial) for f in cand.result.findings]
        if session.problems or session.not_simulated:
            out.not_simulated = not session.problems
            return out
        if cand.result.verdict != "ok":
            out.reasons += [Reason(f.kind, f.message, f.sites[0] if f.sites else "")
                            for f in cand.result.findings if is_fatal(f)][:3]
            return out
        wrong = mismatches(task, cand.outputs, ref.outputs)
        if wrong:
            out.correct = False
            out.reasons += [Reason("wrong_output", f"trial {trial}, {m}") for m in wrong[:3]]
            return out
    out.correct = True
    return out
