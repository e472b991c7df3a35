"""Stage 2: reference and candidate on the simulated world at `screen` size, same inputs, two trials.

All four calls share one run of the world (reference trials first, a barrier between calls), since a
world's start-up costs more than a screen-size call. Protocol findings (deadlock, mismatch, signal
errors, exceptions) and wrong outputs reject. With `record`, the second call of each side (after a warm-up
call, as timing does) is kept as a trace: the cost stage times candidates whose kernels a shape run
cannot execute from these instead of running the world again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pkbsim.screen.candidate import Session, loader
from pkbsim.screen.result import Reason
from pkbsim.taskrun import Call, mismatches, run_calls
from pkbsim.world.findings import is_fatal
from tasks.registry import TaskSpec

TRIALS = 2


class ReferenceFailed(Exception):
    """The task's own reference does not run on the simulated world: a bug of pkb or of the task."""


@dataclass
class Functional:
    reasons: list[Reason] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    correct: bool | None = None
    not_simulated: bool = False
    traces: tuple[dict, dict] | None = None  # (reference, candidate) at screen size, with `record`


def functional(task: TaskSpec, session: Session, world_size: int, seed: int, timeout: float,
               record: bool = False) -> Functional:
    out = Functional()
    load = loader(session, task.reference)
    calls = [Call(t) for t in range(TRIALS)] + [Call(t, load=load, poison=True) for t in range(TRIALS)]
    run = run_calls(task, calls, world_size, seed=seed, timeout=timeout, record_compute=record)
    refs, cands = run.calls[:TRIALS], run.calls[TRIALS:]
    if not all(r.complete for r in refs):
        f = run.result.findings
        raise ReferenceFailed(f"the reference of {task.slug} fails on the simulated world at {world_size} ranks: "
                              f"{f[0].message if f else run.result.verdict}")
    out.findings = [f.to_json() for f in run.result.findings]
    if session.problems or session.not_simulated:
        out.not_simulated = not session.problems
        return out
    if run.result.verdict != "ok":
        out.reasons = [Reason(f.kind, f.message, f.sites[0] if f.sites else "")
                       for f in run.result.findings if is_fatal(f)][:3]
        return out
    for trial, (ref, cand) in enumerate(zip(refs, cands)):
        wrong = mismatches(task, cand.outputs, ref.outputs)
        if wrong:
            out.correct = False
            out.reasons = [Reason("wrong_output", f"trial {trial}, {m}") for m in wrong[:3]]
            return out
    out.correct = True
    if record:
        out.traces = (refs[-1].trace(task, "screen"), cands[-1].trace(task, "screen"))
    return out
