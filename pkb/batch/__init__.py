"""A batch run (`pkb run`): plan the screening jobs, resume from the store, screen the rest in worker
processes (local or Ray), score the survivors on this node, and summarise the rows.

The orchestration of a batch, apart from the command that parses its arguments and renders its results
(pkb/cli/run_cmd.py) and the report that reads them back (pkb/report).
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pkb.batch.discover import candidate_files, pair
from pkb.batch.job import BatchRequest, ScreenJob
from pkb.batch.pool import run_local
from pkb.batch.ray_executor import run_ray
from pkb.errors import UsageError
from pkb.resolve import default_topology, load, parallelkernelbench_tasks, pick_world_size, task_or_usage
from pkb.store import ScoreStore, ScreenStore, file_sha, timeline_name, timelines_dir
from pkbsim import EndedBy, ScreenResult, Semantics, Stage, Verdict

if TYPE_CHECKING:
    from hwbackend import RunRecord, ScoreResult

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
BUILT_IN = [os.path.join(ROOT, "tasks", "solutions"), os.path.join(ROOT, "tests", "broken_candidates")]


def plan(request: BatchRequest) -> tuple[list[ScreenJob], list[str]]:
    """The screening jobs of the request, and the files that could not be paired with a task."""
    from tasks.registry import all_tasks, get  # torch: `pkb --help` imports this module and should not load it

    paths = list(request.candidates) or [p for p in BUILT_IN if os.path.isdir(p)]
    files, missing = candidate_files(paths)
    if missing:
        raise UsageError(f"not found: {', '.join(missing)}; pass candidate files or folders")
    if not files:
        raise UsageError(f"no .py candidates in {', '.join(paths)}")
    tasks = {t.slug: t for t in all_tasks()}
    problem_ids = parallelkernelbench_tasks(request.checkout, tasks)
    only = None
    if request.tasks:
        only = [_known(s, tasks) for s in request.tasks]
    pairs, unknown = pair(files, set(tasks), only, problem_ids)
    seed = request.seed if request.seed is not None else int.from_bytes(os.urandom(4), "little")
    timelines = timelines_dir(request.db)
    jobs = []
    for j in pairs:
        task = tasks.get(j.task) or get(j.task)
        topo = load(request.topology or default_topology(task))
        try:
            ws = pick_world_size(task, request.world_size, topo.num_gpus)
        except UsageError as e:
            unknown.append(f"{os.path.basename(j.candidate)}: {e}")
            continue
        jobs.append(ScreenJob(task.slug, j.candidate, ws, topo.name, seed, request.margin, request.timeout,
                              os.path.join(timelines, timeline_name(task.slug, j.candidate)), request.checkout,
                              cost=request.cost, sizes_budget=request.sizes_budget))
    return jobs, unknown


def _known(slug: str, tasks: dict) -> str:
    return slug if slug in tasks else task_or_usage(slug).slug


def open_store(db: str):
    """The screen's results store (and the timelines' folder beside it)."""
    os.makedirs(timelines_dir(db), exist_ok=True)
    return ScreenStore(db)


def resume(jobs: list[ScreenJob], store, fresh: bool) -> tuple[dict[tuple[str, str], ScreenResult], list[ScreenJob]]:
    """The stored results of the jobs, by (task, candidate), and the jobs still to screen, each with its
    content key ("sha")."""
    results, todo = {}, []
    for job in jobs:
        # the inputs' dtype decides a ParallelKernelBench result as much as the file does
        job = dataclasses.replace(job, sha=file_sha(job.candidate)
                                  + (f":{job.checkout.dtype}" if job.checkout else "")
                                  + ("" if job.cost else ":no-cost")
                                  + ("" if job.sizes_budget is None else f":sizes-{job.sizes_budget:g}"))
        done = None if fresh else store.get(job.task, job.sha, job.world_size, job.topology)
        if done:  # the same content may have been screened under another name
            results[(job.task, job.candidate)] = dataclasses.replace(done, candidate=job.candidate)
        else:
            todo.append(job)
    return results, todo


def screen(todo: list[ScreenJob], store, results: dict, *, executor: str, workers: int, time_limit: float,
           memory_gb: float, sandboxed: Callable[[], bool], on_result: Callable[[ScreenResult], None]) -> None:
    """Screen the jobs in worker processes (local, or on Ray); each result goes into the store and
    `results` as it arrives, then to `on_result`. `sandboxed` is asked once, just before local workers start."""

    def collect(res: ScreenResult) -> None:
        sha = next(j.sha for j in todo if j.candidate == res.candidate and j.task == res.task)
        store.put(sha, res)
        results[(res.task, res.candidate)] = res
        on_result(res)

    if executor == "ray":
        run_ray(todo, time_limit, memory_gb, collect)
    else:
        run_local(todo, workers, time_limit, memory_gb, collect, sandboxed=sandboxed())


def in_order(jobs: list[ScreenJob], results: dict) -> list[ScreenResult]:
    """The results, one row per job that has one, in the jobs' order."""
    return [results[(j.task, j.candidate)] for j in jobs if (j.task, j.candidate) in results]


def score(rows: list[ScreenResult], db: str, correctness_only: bool = False,
          on_start: Callable[[ScreenResult, int, str], None] | None = None) -> dict[str, ScoreResult]:
    """Score the survivors (pass and inconclusive) on this node: NCCL on its GPUs, gloo on the CPU where
    there are none; the results by candidate file. `on_start(row, nproc, backend)` hears of each score
    before it starts."""
    import torch  # (and the scorer with it: not at module level, which `pkb --help` imports)

    from hwbackend import Protocol, ScoreOptions, ScoreRequest, default_preset, score_candidate

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = "nccl" if gpus else "gloo"
    store = ScoreStore(db)
    out = {}
    for r in rows:
        if not r.verdict.goes_to_hardware:
            continue
        nproc = min(r.world_size, gpus) if gpus else r.world_size
        if on_start:
            on_start(r, nproc, backend)
        protocol = Protocol(preset=default_preset(backend), correctness_only=correctness_only)
        request = ScoreRequest(r.task, r.candidate, nproc, backend)
        out[r.candidate] = score_candidate(request, protocol, ScoreOptions(store=store, resume=True))
    return out


@dataclass(frozen=True)
class SummaryRow:
    """One table row per candidate (shared by `pkb run`'s table and `pkb report`'s table and page)."""
    task: str
    candidate: str                # the file's name
    verdict: Verdict
    stage: Stage | EndedBy
    reason: str                   # the first reason, "kind: message"; "" for a pass
    predicted: float | None       # the screen's predicted speed-up
    bottleneck: str
    uncertain: bool | None        # None without a prediction
    measured: float | None        # the hardware's speed-up, where scored and timed
    hw_status: str                # the hardware score's status; "" where not scored
    margin: float | None = None   # the measured speed-up's noise margin (its resolution)
    resolved: bool | None = None  # False: the clock could not tell it from the reference

    @property
    def measured_text(self) -> str:
        """'1.23x ±2%', with '~' where the clock could not tell it from the reference; '' where not timed."""
        if self.measured is None:
            return ""
        return (f"{self.measured:.2f}x" + ("" if self.margin is None else f" ±{self.margin:.0%}")
                + ("~" if self.resolved is False else ""))


def summary_row(r: ScreenResult, score: ScoreResult | RunRecord | None = None) -> SummaryRow:
    """The row of a screen result and its hardware score (this batch's, or the store's latest run)."""
    p = r.predicted
    reason = r.reasons[0] if r.reasons else None
    status = "" if score is None or score.status is None else score.status.value
    return SummaryRow(r.task, os.path.basename(r.candidate), r.verdict, r.stage,
                      f"{reason.kind}: {reason.message}" if reason else "", p.speedup if p else None,
                      p.bottleneck if p else "", p.uncertain if p else None,
                      None if score is None else score.speedup, status,
                      None if score is None else score.noise_margin, None if score is None else score.resolved)


def tally(rows: list[ScreenResult]) -> str:
    """'N passed, N inconclusive (...), N rejected' under the rules the rows are under, and the counts under
    the other rule set where they differ (shared by `pkb run` and `pkb report`)."""
    n = {v: sum(r.verdict is v for r in rows) for v in Verdict}
    line = (f"{n[Verdict.PASS]} passed, {n[Verdict.INCONCLUSIVE]} inconclusive (a limit of pkb: scored on hardware "
            f"like a pass), {n[Verdict.REJECT]} rejected")
    rules = {r.semantics for r in rows}
    if len(rules) != 1:
        return line
    (mine,) = rules
    other = next(s for s in Semantics if s != mine)
    m = {v: sum(r.verdicts.get(other, r.verdict) is v for r in rows) for v in Verdict}
    if m == n:
        return f"{line} (under {mine}'s rules, and {other}'s alike)"
    return (f"{line} under {mine}'s rules; under {other}'s: {m[Verdict.PASS]} passed, {m[Verdict.INCONCLUSIVE]} "
            f"inconclusive, {m[Verdict.REJECT]} rejected")
