"""Stage 2: reference and candidate on the simulated world at `screen` size, same inputs.

The candidate runs in a process of its own (candidate_side.py, isolation.py): it is called once (warm-up,
and the import), then BACK_TO_BACK times in a row, the first after a harness barrier and the rest straight
after the previous call with no harness synchronisation, as a GPU timing loop calls it: a candidate
without an exit barrier lets a fast rank's next call overwrite a symmetric buffer a slower peer still
reads, and that call's outputs come out wrong. Meanwhile this process runs the reference's trials, then
checks every call's outputs against them (`judge`): the reference's outputs and the comparison never
enter the candidate's process.

Protocol findings (deadlock, mismatch, signal errors), exceptions raised in the candidate's own code and
wrong outputs reject. pkb's own limits (limits.py) and a timeout while the simulator was still working
(hang.py) make the run inconclusive instead. With `record`, the second reference and candidate calls (after
the warm-up, as timing does) are kept as traces: the cost stage times candidates whose kernels a shape run
cannot execute, or whose shape run fails, from these instead of running the world again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pkbsim.errors import SimulatorError
from pkbsim.screen.candidate import Session
from pkbsim.screen.cost import SHAPE_RUN_SECONDS, shape_trace
from pkbsim.screen.hang import Watch
from pkbsim.screen.limits import limit_of
from pkbsim.screen.plain import plain
from pkbsim.screen.result import Reason, ReasonKind
from pkbsim.taskrun import Call, TaskRun, mismatches, run_calls
from tasks.registry import TaskSpec

TRIALS = 3        # reference trials (inputs differ per trial)
BACK_TO_BACK = 3  # candidate calls in a row, as a timing loop makes them


class ReferenceFailed(SimulatorError):
    """The task's own reference does not run on the simulated world: a bug of pkb or of the task."""


@dataclass
class ReferenceRun:
    """The reference's trials, run in the screening (parent) process."""
    outputs: list = field(default_factory=list)  # per trial, per rank (plain data, as the candidate's)
    aliased: list = field(default_factory=list)  # per trial, per rank: outputs sharing memory with inputs
    mutated: list = field(default_factory=list)  # per trial, per rank: whether the call changed its inputs
    digests: list = field(default_factory=list)  # per trial, per rank: digest of the inputs as made (None: none)
    limit: Reason | None = None                  # pkb's limit that kept the reference from finishing
    trace: dict | None = None                    # trial 1 at screen size, with `record`
    shape: tuple | None = None                   # (full-size trace or None, why not), with `shape`


@dataclass
class Functional:
    reasons: list[Reason] = field(default_factory=list)  # the candidate's faults
    correct: bool | None = None
    # later calls' wrong outputs by the trial whose inputs they had, where no earlier call had those inputs:
    # pkb's fault alone only if the candidate is right on them in a fresh process (`fresh_call`)
    unconfirmed: dict = field(default_factory=dict)


def fresh_call(fn: Functional, trial: int, right: bool | None) -> bool:
    """Settle the wrong outputs `fn` holds for `trial` by the candidate's answer to that trial alone, in a fresh
    process with one call (ParallelKernelBench's correctness trial): right there, they need an earlier call's
    state and are pkb's fault alone; wrong there, they are faults under every rule set. With no answer (None)
    they stay faults under pkb's rules, which see the later call, and the benchmark's verdict cannot be told:
    False is returned, and the caller makes that verdict inconclusive."""
    for r in fn.unconfirmed.pop(trial, []):
        r.pkb_only = right is not False
        r.message += ("; right in a fresh process with one call on the same inputs" if right else
                      "; wrong in a fresh process with one call on the same inputs too" if right is False else
                      "; a fresh process with one call on the same inputs gave no answer")
    return right is not None


def candidate_calls(load) -> list[Call]:
    """The warm-up call, then BACK_TO_BACK calls of which only the first waits for a harness barrier."""
    trials = [t % TRIALS for t in range(1 + BACK_TO_BACK)]
    return [Call(t, load=load, poison=True, sync=i <= 1) for i, t in enumerate(trials)]


_last_reference: dict = {}  # the last reference run kept, by what decides its outputs (see reference_run)


def reference_run(task: TaskSpec, world_size: int, seed: int, timeout: float, record: bool = False,
                  keep: bool = False, shape: bool = False) -> ReferenceRun:
    """The reference's trials, and with `shape` its full-size shape-run trace as well (taken while the
    candidate's process is still at work: the cost stage needs it unless the candidate's own shape run
    fails). With `keep`, the last run is kept and reused for the next candidate of the same task, size and
    seed (a batch screens many): only for a process whose candidates are not forked from it (a pool worker,
    whose zygote forks them), or they would find the reference's outputs in their memory."""
    key = (task.slug, id(task), world_size, seed, timeout, record, shape)
    if keep and key in _last_reference:
        return _last_reference[key]
    _last_reference.clear()
    ref = _reference_run(task, world_size, seed, timeout, record)
    if shape and ref.limit is None:
        ref.shape = shape_trace(task, None, world_size, seed, "full", min(timeout, SHAPE_RUN_SECONDS))
    if keep:
        _last_reference[key] = ref
    return ref


def _reference_run(task: TaskSpec, world_size: int, seed: int, timeout: float, record: bool) -> ReferenceRun:
    with Watch() as watch:
        run = run_calls(task, [Call(t) for t in range(TRIALS)], world_size, seed=seed, timeout=timeout,
                        record_compute=record, keep_inputs=False)
    out = ReferenceRun()
    if not all(c.complete for c in run.calls):
        limits = [limit_of(r.error) for r in run.raised]
        out.limit = (next((Reason(ReasonKind.LIMIT, lim) for lim in limits if lim), None)
                     or slow(run, watch, None, timeout))
        if out.limit is None:
            f = run.result.findings
            raise ReferenceFailed(f"the reference of {task.slug} fails on the simulated world at {world_size} ranks: "
                                  f"{f[0].message if f else run.result.verdict}")
        return out
    out.outputs = [[plain(o) for o in c.outputs] for c in run.calls]
    out.aliased = [c.aliased for c in run.calls]
    out.mutated = [c.mutated for c in run.calls]
    out.digests = [[d and d[0] for d in c.digests] for c in run.calls]
    if record:
        out.trace = run.calls[1].trace(task, "screen")
    return out


def judge(task: TaskSpec, ref: ReferenceRun, cand) -> Functional:
    """Every candidate call's outputs against the reference trial whose inputs it had; then the GPU scorer's
    integrity checks, where the reference does not do the same: an output sharing memory with the call's
    inputs, a call that changes its inputs (a correct answer is still not accepted there). Only the first
    call's outputs decide under every rule set (ParallelKernelBench's correctness trial is a fresh process
    with one call); the later calls' and the integrity checks are pkb's rules alone (`Reason.pkb_only`): its
    scorer checks every timed call, that harness's timing loop checks none. A later call some rank did not
    finish is not compared when a race between calls ended the run (its reason says so); the first call is
    always compared, so no report from the candidate's process can skip it. `cand` is the
    candidate process's CandidateReport. Whether a call changed its inputs is judged here, from the inputs
    this process made for the reference's trial: the candidate's process hands back a digest of its inputs
    after each call, compared here with the digest of the same inputs as made. A candidate that rewrites
    pkb's flag or digest in its process no longer passes; one that hashes its inputs on entry and hands that
    digest back through pkb's own code still can (the GPU scorer, which is final, judges mutation on its
    trusted side). A digest it withholds counts as a change."""
    cut_short = any(r.pkb_only for r in cand.reasons)
    outputs = cand.outputs or [[None] * len(ref.outputs[0])]
    compared = [i for i, outs in enumerate(outputs) if not (i and cut_short and any(o is None for o in outs))]
    fn = Functional()
    for i in compared:
        wrong = mismatches(task, outputs[i], ref.outputs[i % TRIALS])
        if not wrong:
            continue
        reasons = [Reason(ReasonKind.WRONG_OUTPUT, f"{_which(i)}: {m}", cand.solution_site, i > 0) for m in wrong[:3]]
        if i == 0:
            return Functional(reasons, False)
        if not any(j % TRIALS == i % TRIALS for j in compared[:compared.index(i)]):
            fn.unconfirmed.setdefault(i % TRIALS, []).extend(reasons)
        fn.reasons += reasons
    if fn.reasons:
        fn.correct = False
        return fn
    for i in compared:
        for rank in range(len(outputs[i])):
            problem = _integrity(_at(cand.aliased, i, rank), _at(ref.aliased, i % TRIALS, rank),
                                 _changed(_at(cand.input_digests, i, rank), _at(ref.digests, i % TRIALS, rank)),
                                 _at(ref.mutated, i % TRIALS, rank))
            if problem:
                kind, what = problem
                return Functional([Reason(kind, f"{_which(i)}: rank {rank}: {what} (the reference does not): pkb's "
                                                f"GPU scorer rejects it as an integrity violation", cand.solution_site,
                                         True)], True)
    return Functional(correct=True)


def _at(per_call: list, i: int, rank: int):
    return per_call[i][rank] if i < len(per_call) and rank < len(per_call[i]) else None


def _changed(after: str | None, made: str | None) -> bool | None:
    """Whether the digest handed back differs from that of the inputs made (None: none made to compare)."""
    return None if made is None else after != made


def _integrity(aliased, ref_aliased, mutated, ref_mutated) -> tuple[str, str] | None:
    extra = sorted(set(aliased or ()) - set(ref_aliased or ()))
    if extra:
        return ReasonKind.ALIASED_OUTPUT, f"output {extra[0]} shares memory with an input; return new memory"
    if mutated and ref_mutated is False:
        return ReasonKind.MODIFIED_INPUT, "the call changed its inputs; work on a copy"
    return None


def _which(i: int) -> str:
    """Call i (0-based) of candidate_calls, named with the trial whose inputs it had and how it followed the
    previous call."""
    trial = i % TRIALS
    if i == 0:
        return f"call 1 (warm-up, trial {trial}'s inputs)"
    if i == 1:
        return f"call 2 (trial {trial}'s inputs, after a harness barrier)"
    return (f"call {i + 1} (trial {trial}'s inputs, straight after call {i} with no barrier between them, as a "
            f"timing loop makes them: does a rank return, and reuse its buffers, before its peers have read them?)")


def slow(run: TaskRun, watch: Watch, session: Session | None, timeout: float) -> Reason | None:
    """The run's timeout as pkb's limit when the simulator was still working at it (None: no timeout, or the
    candidate's own code was looping)."""
    if run.result.verdict != "timeout" or (session and watch.candidate_loop(session.path) is not None):
        return None
    return Reason(ReasonKind.TIME_LIMIT, f"the simulation did not finish within --timeout {timeout:g} s while the "
                                         f"ranks were still working (slow simulation, not a hang)")
