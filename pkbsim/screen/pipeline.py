"""The screen: static checks, then the functional run, then the cost prediction; the first stage that
rejects ends it. A candidate that runs into a limit of pkb (something it cannot simulate, a package or
header not installed here, the simulation's time, a reference that fails on the simulator) is
inconclusive, with the limit named, so it goes to hardware instead of being accepted or rejected."""
from __future__ import annotations

import hashlib
import os
import subprocess
import time
from dataclasses import dataclass, replace

from candidate_sandbox import CANDIDATE_CACHES, TRUSTED_BUILDS
from pkbsim.errors import SimulatorError
from pkbsim.ptx.compile import cache_root
from pkbsim.screen.candidate import Session
from pkbsim.screen.candidate_side import CandidateJob, CandidateReport
from pkbsim.screen.cost import SHAPE_RUN_SECONDS, predict
from pkbsim.screen.functional import BACK_TO_BACK, ReferenceFailed, fresh_call, judge, reference_run
from pkbsim.screen.confinement import STOPPED_EXIT
from pkbsim.screen.isolation import ChildExit, Zygote
from pkbsim.screen.parallelkernelbench import budgeted
from pkbsim.screen.prebuild import builds_extensions
from pkbsim.screen.result import Reason, ReasonKind, ScreenResult, Semantics, Stage
from pkbsim.screen.sizes import describe, judge_sizes, ladder, reference_at
from pkbsim.screen.static import static_reasons
from pkbsim.taskrun import mismatches
from pkbsim.timing.topology import Topology
from pkbsim.screen.defaults import MARGIN, RUN_TIMEOUT_S, SIZES_SECONDS
from tasks.parallelkernelbench.naming import Checkout
from tasks.registry import TaskSpec

CHILD_SLACK_S = 60.0  # beyond its build, functional and shape-run limits, before a candidate's process is killed


@dataclass
class ScreenOptions:
    world_size: int
    topology: Topology
    seed: int = 0
    margin: float = MARGIN
    timeout: float = RUN_TIMEOUT_S
    timeline: str | None = None  # where to write the candidate's simulated timeline (Chrome trace JSON)
    cost: bool = True
    build_timeout: float = 600.0  # for building the candidate's CUDA extensions, before the runs (off their clock)
    checkout: Checkout | None = None  # the ParallelKernelBench checkout the task comes from (its child registers it)
    semantics: Semantics = Semantics.PKB  # whose rules the verdict is under (both are in ScreenResult.verdicts)
    sizes_budget: float = SIZES_SECONDS  # seconds of candidate runs for the sizes stage (sizes.py); 0: no stage


def screen(task: TaskSpec, path: str, opts: ScreenOptions, spawner=None) -> ScreenResult:
    """`spawner` starts the candidate's processes (isolation.py): a pool worker's Zygote, else one forked here,
    so this process must not yet have run a reference (its outputs would be in the zygote's memory). The result is under the rules of `opts.semantics`,
    with the verdict under each rule set in `verdicts`: the stages decide under ParallelKernelBench's rules
    and set aside the faults only pkb's count (`Reason.pkb_only`), so one screen gives both."""
    own = spawner is None
    spawner = spawner or Zygote()   # forked before the reference runs here: its children never hold its outputs
    try:
        return _screen(task, os.path.abspath(path), opts, spawner, keep=not own).settle().under(opts.semantics)
    finally:
        if own:
            spawner.close()


def _screen(task: TaskSpec, path: str, opts: ScreenOptions, spawner, keep: bool) -> ScreenResult:
    res = ScreenResult(task.slug, path, opts.world_size, opts.topology.name, opts.seed)
    t0 = time.perf_counter()
    problems = static_reasons(path)
    res.seconds[Stage.STATIC] = round(time.perf_counter() - t0, 3)
    if problems:
        return res.reject(Stage.STATIC, problems)
    if opts.timeline:   # made before the candidate's process, which sees it read-only (confinement.py)
        os.makedirs(os.path.dirname(os.path.abspath(opts.timeline)), exist_ok=True)
    source = Session(path)
    builds = builds_extensions(path, (opts.checkout.root,) if opts.checkout else ())
    if builds:
        build_runtime()
    job = CandidateJob(task.slug, path, opts.world_size, opts.seed, opts.timeout, opts.build_timeout, opts.cost,
                       opts.checkout,
                       ((os.path.dirname(os.path.abspath(opts.timeline)),) if opts.timeline else ())
                       + pkbs_builds(), own_cache(path) if builds else "")
    t0 = time.perf_counter()
    shape = opts.cost and not builds and not source.mentions("triton.jit")  # the candidate's may run
    child = spawner.start(job.to_json())
    try:
        ref = reference_run(task, opts.world_size, opts.seed, opts.timeout, record=opts.cost, keep=keep, shape=shape)
    except ReferenceFailed as e:
        child.kill()
        res.seconds[Stage.FUNCTIONAL] = round(time.perf_counter() - t0, 3)
        return res.inconclusive(Stage.FUNCTIONAL, Reason(ReasonKind.REFERENCE, f"{e} (a bug of the task or of pkb)"))
    except BaseException:
        child.kill()
        raise
    if ref.limit:
        child.kill()
        res.seconds[Stage.FUNCTIONAL] = round(time.perf_counter() - t0, 3)
        return res.inconclusive(Stage.FUNCTIONAL, ref.limit)
    payload, ended = child.result(opts.build_timeout + 2 * opts.timeout + SHAPE_RUN_SECONDS + CHILD_SLACK_S)
    wall = time.perf_counter() - t0
    res.seconds[Stage.FUNCTIONAL] = round(wall, 3)
    if payload is None:
        return _ended(res, ended)
    if "pkb_error" in payload:
        last = str(payload["pkb_error"]).strip().splitlines()[-1:]
        return res.inconclusive(Stage.FUNCTIONAL, Reason(ReasonKind.PKB_ERROR, f"pkb failed in the candidate's process: "
                                                                  f"{last[0] if last else '?'}"))
    rep = CandidateReport.from_payload(payload)
    res.seconds["build"] = rep.seconds.get("build", 0.0)
    res.seconds[Stage.FUNCTIONAL] = round(wall - res.seconds["build"] - rep.seconds.get("shape", 0.0), 3)
    res.findings, res.compile = rep.findings, rep.compile or None
    if rep.problems:
        return res.reject(Stage.STATIC, rep.problems)
    res.checked.append(Stage.STATIC)
    if rep.not_simulated:
        res.not_simulated = rep.not_simulated
        return res.inconclusive(Stage.FUNCTIONAL, Reason(ReasonKind.NOT_SIMULATED, "; ".join(rep.not_simulated)))
    if rep.limit:
        return res.inconclusive(Stage.FUNCTIONAL, rep.limit)
    if any(not r.pkb_only for r in rep.reasons):
        return res.reject(Stage.FUNCTIONAL, rep.reasons)
    fn = judge(task, ref, rep)
    unanswered = []  # trials whose fresh-process check gave no answer
    for trial in list(fn.unconfirmed):
        if not fresh_call(fn, trial, _right_when_fresh(task, ref, job, spawner, trial, opts)):
            unanswered.append(trial)
    res.correct = fn.correct
    res.warnings = [r for r in rep.reasons + fn.reasons if r.pkb_only]
    if any(not r.pkb_only for r in fn.reasons):
        return res.reject(Stage.FUNCTIONAL, [r for r in fn.reasons if not r.pkb_only])
    if unanswered:  # a reject under pkb's rules (the warnings), and no verdict under the benchmark's
        return res.inconclusive(Stage.FUNCTIONAL, Reason(
            ReasonKind.LIMIT, f"trial {unanswered[0]}'s inputs were answered wrong on a later call, and the check "
                              f"that decides it under ParallelKernelBench's rules (one call in a fresh process) gave "
                              f"no answer"))
    res.checked.append(Stage.FUNCTIONAL)
    res.stage = Stage.FUNCTIONAL
    if opts.sizes_budget > 0 and budgeted(task) and ladder(task):
        reasons = _sizes(task, ref, rep, job, spawner, opts, res)
        res.warnings += [r for r in reasons if r.pkb_only]   # a draw beyond the benchmark's trials
        if any(not r.pkb_only for r in reasons):
            return res.reject(Stage.SIZES, [r for r in reasons if not r.pkb_only])
    if not opts.cost or (rep.screen_trace is None and res.warnings):
        return res  # no trace of a whole call to time: a race between calls ended the run before one
    t0 = time.perf_counter()
    res.predicted = predict(task, source, rep, ref.trace, opts.world_size, opts.topology, opts.seed,
                            opts.timeout, opts.timeline, ref.shape)
    res.seconds[Stage.COST] = round(time.perf_counter() - t0 + rep.seconds.get("shape", 0.0), 3)
    res.timeline, res.stage = opts.timeline, Stage.COST
    res.checked.append(Stage.COST)
    p = res.predicted
    if p.speedup < opts.margin and not p.uncertain:
        return res.reject(Stage.COST, [Reason(ReasonKind.SLOWER, f"predicted speed-up {p.speedup:.2f}x is below the margin "
                                                    f"{opts.margin:g}x ({p.bottleneck}: candidate "
                                                    f"{p.candidate_us:.1f} us vs reference {p.reference_us:.1f} us)")])
    return res


def _sizes(task: TaskSpec, ref, rep: CandidateReport, job: CandidateJob, spawner, opts: ScreenOptions,
           res: ScreenResult) -> list[Reason]:
    """The sizes stage (sizes.py): the candidate's runs in a process of its own, then the reference's at the same
    sizes here. Returns the candidate's faults; what was not checked, and why, goes to `res.notes` (a limit of
    pkb, the budget: no verdict)."""
    t0 = time.perf_counter()
    digest = ref.digests[0][0] if ref.digests and ref.digests[0] else None
    child = spawner.start(replace(job, cost=False, sizes=ladder(task), sizes_budget=opts.sizes_budget,
                                  screen_call_s=rep.seconds.get("functional", 0.0) / (1 + BACK_TO_BACK),
                                  screen_digest=digest or "").to_json())
    limit_s = min(opts.timeout, 2 * opts.sizes_budget)
    t_ahead = time.perf_counter()
    known = _reference_ahead(task, opts, child, limit_s)
    limit_s = max(limit_s - (time.perf_counter() - t_ahead), 1.0)
    payload, ended = child.result(opts.build_timeout + 2 * opts.sizes_budget + CHILD_SLACK_S)
    try:
        if payload is None or "pkb_error" in payload:
            why = (f"the candidate's process {ended.describe()}" if payload is None else
                   f"pkb failed in the candidate's process: {str(payload['pkb_error']).strip().splitlines()[-1:]}")
            res.notes.append(f"sizes stage not checked: {why}")
            return []
        got = CandidateReport.from_payload(payload)
        if got.problems or got.not_simulated or got.limit:
            what = got.limit.message if got.limit else "; ".join(got.not_simulated) or got.problems[0].message
            res.notes.append(f"sizes stage not checked: {what}")
            return []
        if got.reasons:
            res.findings += got.findings
            return got.reasons
        reasons, notes = judge_sizes(task, got.sized, opts.world_size, opts.seed, limit_s, known)
        for r in reasons:
            r.site = r.site or rep.solution_site
        ladder_runs = [r for r in got.sized if r["trial"] == 0]
        draws = [r for r in got.sized if r["trial"]]
        ran = ", ".join(f"{describe([r['m'], r['n']])} trial 0 ({r['seconds']:.1f} s)" for r in ladder_runs)
        if draws:
            ran += (f"; its inputs do not grow with the size: {len(draws)} more draws (trials {draws[0]['trial']}-"
                    f"{draws[-1]['trial']}, {sum(r['seconds'] for r in draws):.1f} s)")
        res.notes += [f"sizes checked: {ran or 'none'}"] + notes + ([got.sizes_note] if got.sizes_note else [])
        if got.sized and all(r.pkb_only for r in reasons):
            res.checked.append(Stage.SIZES)
            res.stage = Stage.SIZES
        return reasons
    finally:
        res.seconds[Stage.SIZES] = round(time.perf_counter() - t0, 3)


def _reference_ahead(task: TaskSpec, opts: ScreenOptions, child, limit_s: float) -> dict:
    """The reference at the sizes the candidate's process runs first (sizes.ladder, trial 0), here while that
    process runs, each in a world of its own: (m, n, trial) -> outputs for judge_sizes, which ran them only after
    the candidate's process had ended (up to 2 s of a warm screen). It stops before a size once that process has
    ended (its runs may have stopped early: judge_sizes runs what is missing) and at a size that does not finish
    cleanly (judge_sizes runs it again and says why), all under the stage's `limit_s` for the reference."""
    known: dict = {}
    t0 = time.perf_counter()
    for size in ladder(task):
        left = limit_s - (time.perf_counter() - t0)
        if child.ended() or left <= 0:
            break
        outputs = reference_at(task, size, 0, opts.world_size, opts.seed, left)
        if outputs is None:
            break
        known[(size[0], size[1], 0)] = outputs
    return known


def _right_when_fresh(task: TaskSpec, ref, job: CandidateJob, spawner, trial: int, opts: ScreenOptions) -> bool | None:
    """Whether the candidate, called once in a fresh process on `trial`'s inputs, gives the reference's
    outputs (None: it gave none, for whatever reason)."""
    child = spawner.start(replace(job, fresh_trial=trial, cost=False).to_json())
    payload, _ = child.result(opts.build_timeout + opts.timeout + CHILD_SLACK_S)
    if payload is None or "pkb_error" in payload:
        return None
    rep = CandidateReport.from_payload(payload)
    if rep.problems or rep.not_simulated or rep.limit or rep.reasons or len(rep.outputs) != 1:
        return None if not rep.reasons else False
    if any(o is None for o in rep.outputs[0]):
        return False
    return not mismatches(task, rep.outputs[0], ref.outputs[trial])


def build_runtime() -> None:
    """pkb's own stand-in runtime, its tensor-map driver stand-in and the precompiled headers of host units
    (g++'s, and clang++'s where it is installed), built here (the trusted side) before the candidate's process
    starts: that process sees them read-only (pkbs_builds). Where the runtime cannot be built, the candidate's
    process meets the same limit itself, as before; without the headers its host unit takes longer."""
    from pkbsim.cuda.driver import build_dir
    from pkbsim.cuda.host_header import clang_precompiled, precompiled
    from pkbsim.cuda.runtime_libs import runtime_dir
    try:
        runtime_dir()
        build_dir()
        precompiled()
        clang_precompiled()
    except (SimulatorError, OSError, RuntimeError, subprocess.SubprocessError):
        pass


def pkbs_builds() -> tuple[str, ...]:
    """The build cache a candidate's process must not write: all of it (its own cache is bound elsewhere
    for it, and every cache pkb's code writes in that process goes there: confinement.py). In a screen or run
    sandbox, pkb's own builds and the per-file caches are bound writable (candidate_sandbox._private_cache)
    and the rest of it (PTX, compile checks, ThunderKittens' copy) is private to the sandbox: one worker's
    candidates would otherwise share it, and one could plant an entry a later one reads. Those bound folders
    are mounts of their own, which a read-only remount of the root does not reach: each is named too."""
    root = cache_root()
    folders = (root, *(os.path.join(root, kind) for kind in (CANDIDATE_CACHES, *TRUSTED_BUILDS)))
    return tuple(f for f in folders if os.path.isdir(f))


def own_cache(path: str) -> str:
    """The candidate file's own build cache, made here (the trusted side) before its process starts: one per
    file content, kept across screens (confinement.py shows the candidate this one alone)."""
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:32]
    folder = os.path.join(cache_root(), CANDIDATE_CACHES, digest)
    os.makedirs(folder, exist_ok=True)
    return folder


def _ended(res: ScreenResult, ended: ChildExit) -> ScreenResult:
    """The verdict on a candidate whose process handed back nothing. An exit is the candidate's doing (the
    simulator never exits a process; `os._exit` ends a rank's process on a GPU too); a signal, a time
    limit or an unreadable result pkb cannot pin on the candidate: inconclusive, so it goes to GPU scoring."""
    what = f"the candidate's process {ended.describe()}"
    if ended.code == STOPPED_EXIT and not ended.unreadable:
        return res.reject(Stage.FUNCTIONAL, [Reason(ReasonKind.CRASH, what, res.candidate)])
    if ended.code is not None and not ended.unreadable:
        return res.reject(Stage.FUNCTIONAL, [Reason(ReasonKind.CRASH, f"{what} (os._exit, sys.exit from a thread, or exit "
                                                                  f"in native code: a process that ends mid-call)",
                                                res.candidate)])
    kind = ReasonKind.TIME_LIMIT if ended.timed_out else ReasonKind.WORKER_CRASH
    mine = os.path.realpath(res.candidate)
    own = next((f"{path}:{line}" for path, line, _ in ended.frames if os.path.realpath(path) == mine), "")
    return res.inconclusive(Stage.FUNCTIONAL, Reason(kind, f"{what}: pkb cannot tell whose fault it is", own))
