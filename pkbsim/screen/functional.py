"""Stage 2: reference and candidate on the simulated world at `screen` size, same inputs.

All calls share one run of the world (reference trials first), since a world's start-up costs more than
a screen-size call. The candidate is called once after a harness barrier (warm-up, and the import), then
BACK_TO_BACK times in a row, the first after a barrier and the rest straight after the previous call with
no harness synchronisation, as a GPU timing loop calls it: a candidate without an exit barrier lets a
fast rank's next call overwrite a symmetric buffer a slower peer still reads, and that call's outputs
come out wrong. Every call's outputs are checked.

Protocol findings (deadlock, mismatch, signal errors), exceptions raised in the candidate's own code and
wrong outputs reject. pkb's own limits (limits.py) and a timeout while the simulator was still working
(hang.py) make the run inconclusive instead. With `record`, the second reference and candidate calls (after
the warm-up, as timing does) are kept as traces: the cost stage times candidates whose kernels a shape run
cannot execute, or whose shape run fails, from these instead of running the world again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pkbsim.screen.candidate import NotSimulated, Session, loader
from pkbsim.screen.hang import Watch, site
from pkbsim.screen.limits import limit_of, own_site
from pkbsim.screen.result import Reason
from pkbsim.taskrun import Call, TaskRun, mismatches, run_calls
from pkbsim.world.findings import is_fatal
from tasks.registry import TaskSpec

TRIALS = 3        # reference trials (inputs differ per trial)
BACK_TO_BACK = 3  # candidate calls in a row, as a timing loop makes them


class ReferenceFailed(Exception):
    """The task's own reference does not run on the simulated world: a bug of pkb or of the task."""


@dataclass
class Functional:
    reasons: list[Reason] = field(default_factory=list)  # the candidate's faults
    limit: Reason | None = None                            # pkb's limit that left the run inconclusive
    findings: list[dict] = field(default_factory=list)
    correct: bool | None = None
    traces: tuple[dict, dict] | None = None  # (reference, candidate) at screen size, with `record`


def candidate_calls(load) -> list[Call]:
    """The warm-up call, then BACK_TO_BACK calls of which only the first waits for a harness barrier."""
    trials = [t % TRIALS for t in range(1 + BACK_TO_BACK)]
    return [Call(t, load=load, poison=True, sync=i <= 1) for i, t in enumerate(trials)]


def functional(task: TaskSpec, session: Session, world_size: int, seed: int, timeout: float,
               record: bool = False) -> Functional:
    out = Functional()
    cand_calls = candidate_calls(loader(session, task.reference))
    with Watch() as watch:
        run = run_calls(task, [Call(t) for t in range(TRIALS)] + cand_calls, world_size, seed=seed, timeout=timeout,
                        record_compute=record, keep_inputs=False)
    refs, cands = run.calls[:TRIALS], run.calls[TRIALS:]
    out.findings = [f.to_json() for f in run.result.findings]
    # the session's own NotSimulated is recorded where it is raised
    limits = [limit_of(r.error) for r in run.raised if not isinstance(r.error, NotSimulated)]
    if not all(r.complete for r in refs):
        out.limit = next((Reason("limit", lim) for lim in limits if lim), None) or _slow(run, watch, session, timeout)
        if out.limit is None:
            f = run.result.findings
            raise ReferenceFailed(f"the reference of {task.slug} fails on the simulated world at {world_size} ranks: "
                                  f"{f[0].message if f else run.result.verdict}")
        return out
    for lim in filter(None, limits):
        session.limit(lim)
    if session.problems or session.not_simulated:
        return out
    if run.result.verdict == "timeout":
        out.limit = _slow(run, watch, session, timeout)
        if out.limit is None:
            spot = watch.candidate_loop(session.path)
            out.reasons = [Reason("timeout", f"no result after {timeout:g} s: the candidate's code loops outside "
                                             f"any simulated wait", site(spot) if spot else "")]
        return out
    if run.result.verdict == "error":
        out.reasons, out.limit = _errors(run, session)
        return out
    if run.result.verdict != "ok":
        out.reasons = [Reason(f.kind, f.message, f.sites[0] if f.sites else "")
                       for f in run.result.findings if is_fatal(f)][:3]
        return out
    for i, cand in enumerate(cands):
        wrong = mismatches(task, cand.outputs, refs[cand_calls[i].trial].outputs)
        if wrong:
            out.correct = False
            out.reasons = [Reason("wrong_output", f"{_which(i)}: {m}", session.solution_site) for m in wrong[:3]]
            return out
    out.correct = True
    if record:
        out.traces = (refs[1].trace(task, "screen"), cands[1].trace(task, "screen"))
    return out


def _which(i: int) -> str:
    if i == 0:
        return "call 1 (warm-up)"
    return (f"call {i + 1} (of {BACK_TO_BACK} made back to back with no barrier between them, as a timing loop "
            f"makes them: does a rank return, and reuse its buffers, before its peers have read them?)")


def _slow(run: TaskRun, watch: Watch, session: Session, timeout: float) -> Reason | None:
    """The run's timeout as pkb's limit when the simulator was still working at it (None: no timeout, or the
    candidate's own code was looping)."""
    if run.result.verdict != "timeout" or watch.candidate_loop(session.path) is not None:
        return None
    return Reason("time_limit", f"the simulation did not finish within --timeout {timeout:g} s while the ranks were "
                                f"still working (slow simulation, not a hang)")


def _errors(run: TaskRun, session: Session) -> tuple[list[Reason], Reason | None]:
    """Reasons for ranks that raised: the candidate's when its own code is on the traceback, else pkb's."""
    first = next((r for r in run.raised if r.call >= TRIALS), None)
    errors = [f for f in run.result.findings if f.kind == "error"]
    if first is None:
        return [Reason(f.kind, f.message, f.sites[0] if f.sites else "") for f in errors[:3]], None
    where = own_site(session.path, first.error)
    message = f"rank {first.rank} raised {type(first.error).__name__}: {first.error}"
    if where is None:
        return [], Reason("pkb_error", f"{message} (outside the candidate's code: a bug or gap of pkb)")
    return [Reason("error", message, where)], None
