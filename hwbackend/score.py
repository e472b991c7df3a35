"""`score`: the trusted scorer. Candidate and reference run as separate torchrun jobs, in alternating
order, on the same secret-seeded inputs; the reference's outputs are held in this process only, never
on disk while the candidate runs. Outputs of the correctness trials and of randomly chosen timed calls
are compared here. Time is measured per batch of calls run back to back on fresh inputs (worker.py), from a
barrier to a sync of every stream (CUDA events on GPUs), the slowest rank's; a batch holds as many calls as
the reference's warm-up says make it long against the harness's overhead (batch_size.py). The worker's clocks
are captured before the candidate is imported, and its times count only where they agree with this process's
own clock over each batch, less the harness's overhead measured on the reference (clock_check.py).
"""
from __future__ import annotations

import hmac
import math
import os
import random
import secrets
import shutil
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial

import candidate_sandbox as sandbox
from hwbackend import defaults, saved
from hwbackend.batch_size import WarmupReport, calls_per_batch
from hwbackend.cluster import Cluster
from hwbackend.clock_check import BatchClock, cross_check
from hwbackend.cluster_job import ClusterJob
from hwbackend.guard import fingerprint
from hwbackend.job_spec import JobSpec
from hwbackend.jobs import Job, JobFailure, become_subreaper
from hwbackend.protocol import heard
from hwbackend.recorder import Recorder
from hwbackend.result import ClockSummary, FailureKind, Finding, ScoreResult, Status, TrialCheck
from hwbackend.timing import summarize
from tasks.api import aliased_outputs, compare
from tasks.registry import TaskSpec, get

IMPLAUSIBLE_SPEEDUP = 10.0
# seconds a batch's capture in a CUDA graph and its inputs' fill may take (`--graphs`): 1-11 s for 4000-8192 calls
# on an H100 or H200 (benchmarks/results/score_resolution/run7_h100_graphs, run8_h200_graphs). Beyond it the score is
# timed eagerly
GRAPH_STAGING_S = 60.0
# a capture still running this many seconds before that bound writes every thread's stack into the job's log, whose
# last GRAPHS_LOG_CHARS the timed-again score keeps (ClockSummary.graphs_log): where a capture that never answers was
STACKS_BEFORE_S = 10.0
GRAPHS_LOG_CHARS = 6000
# CPU seconds a stopped candidate may show for one of the reference's turns: a thread caught in a system call
# finishes it before it stops; more is something that restarted it (hwbackend/jobs.py Job.ran_while_stopped)
RAN_WHILE_STOPPED_S = 0.002


@dataclass(frozen=True)
class Protocol:
    """How much evidence a score gathers: correctness trials on the first launch, then (unless
    correctness_only) warm-up and timed batches of calls in every launch, candidate and reference alternating."""
    trials: int = defaults.TRIALS
    launches: int = defaults.LAUNCHES
    batches: int = defaults.BATCHES
    calls: int = defaults.CALLS    # per timed batch; 0: chosen from the reference's warm-up (batch_size.py)
    warmup: int = defaults.WARMUP  # the first alone, the others as one timed batch
    # a candidate "faster" after `launches` launches is timed over as many more and judged on all: with two
    # launches a side the rule cannot see how much a process's own offset moves a score (benchmarks/
    # decision_rule_rates.py: identical code called faster in 4-6.5% of scores at 2% launch-to-launch noise,
    # none once confirmed)
    confirm: bool = True
    # the two jobs of a launch taking turns batch by batch (_interleaved), where each has a sandbox of its own and
    # on one node: an experiment, off by default (what a stop does not cover: docs/threat_model.md)
    interleave: bool = False
    # each timed batch captured in one CUDA graph and timed as one replay (worker.py `capture`): no host in the
    # timed region. A score where either job cannot be captured, or goes wrong only under the graph, is timed
    # again eagerly, both jobs (GraphsFailed): never the candidate's fault
    graphs: bool = False
    timeout: float = defaults.JOB_TIMEOUT_S  # seconds per job
    preset: str = "screen"
    correctness_only: bool = False

    def plan(self, seeds: Seeds, launch: int) -> Plan:
        trials = self.trials if launch == 0 else 0
        if self.correctness_only:
            return Plan(seeds, launch, trials, 0, 0)
        return Plan(seeds, launch, trials, self.warmup, self.batches, self.graphs)

    @property
    def timed_launches(self) -> int:
        return 1 if self.correctness_only else self.launches


class Plan:
    """The calls of one launch, each named by a key (phase, launch, index...) from which `Seeds` derives
    every rank's own seed. How many calls a timed batch holds may be known only after the reference's
    warm-up, so a batch's keys are made when it is sent, and the calls whose outputs are checked are drawn
    from a generator the candidate cannot see."""

    def __init__(self, seeds: Seeds, launch: int, trials: int, warmup: int, batches: int, graphs: bool = False):
        self.seeds, self.launch, self.batches, self.graphs = seeds, launch, batches, graphs
        self.correctness = [("trial", launch, i) for i in range(trials)]
        self.warmup = [("warmup", launch, i) for i in range(warmup)]
        self._checked: dict[int, list[int]] = {}

    def timed(self, batch: int, calls: int) -> list[tuple]:
        return [("timed", self.launch, batch, i) for i in range(calls)]

    def checked(self, batch: int, calls: int) -> list[int]:
        """The calls of a batch whose outputs are saved and compared: two at random, the same for both jobs of
        the launch (sent to a job only after its batch ran)."""
        if batch not in self._checked:
            self._checked[batch] = sorted(self.seeds.rng.sample(range(calls), k=min(2, calls)))
        return self._checked[batch]

    def for_rank(self, keys: list[tuple], rank: int) -> list[list[int]]:
        """What rank `rank` is sent for these calls: its own seeds, nothing of its peers'."""
        return [self.seeds.for_rank(key, rank) for key in keys]


@dataclass
class JobResult:
    samples: list[float]  # seconds per call of each timed batch (the slowest rank's batch over its calls)
    out_dir: str
    findings: list[Finding] = field(default_factory=list)  # the ranks' own, and the job's leftovers
    clocks: list[BatchClock] = field(default_factory=list)  # each timed batch by both clocks
    starts: list[float] = field(default_factory=list)  # when each timed batch was started (time.monotonic)
    fingerprints: dict[str, list[str]] = field(default_factory=dict)  # trial<i>-rank<r> -> [before, after]
    checked: list[str] = field(default_factory=list)  # the timed calls whose outputs were saved: timed<b>-<i>
    # when the job started, was ready to time (correctness trials and warm-up done) and ended (time.monotonic)
    span: dict[str, float] = field(default_factory=dict)


class GraphsFailed(JobFailure):
    """Something went wrong in a phase timed with CUDA graphs (Protocol.graphs) that the eager protocol may not
    show: the score is taken again eagerly, and that one decides."""

    def __init__(self, why: str, details: str = ""):
        super().__init__(FailureKind.GRAPH_UNAVAILABLE, why, details=details)


@contextmanager
def _graph_phase(graphs: bool):
    """A job's failure in a graph-timed phase, as GraphsFailed."""
    try:
        yield
    except GraphsFailed:
        raise
    except JobFailure as e:
        if not graphs:
            raise
        raise GraphsFailed(f"{e.kind}: {e.message}", e.details) from e


@contextmanager
def _bounded(job, seconds: float, what: str):
    """`job`'s replies within `seconds` from now (or its own deadline, if sooner): a timeout says `what` took longer,
    and which step each silent rank was at."""
    own = job.deadline
    job.deadline = min(own, time.monotonic() + seconds)
    try:
        yield
    except JobFailure as e:
        if e.kind is not FailureKind.TIMEOUT or job.deadline >= own:
            raise
        raise GraphsFailed(f"{what} took more than {seconds:g} s ({e.message.split('; ', 1)[-1]})",
                           job.log_tail(GRAPHS_LOG_CHARS)) from e
    finally:
        job.deadline = own


class Seeds:
    """Per-call, per-rank seeds derived from a secret that never leaves this process. A rank is sent, for
    each call, the call's shared seed (what every rank must draw identically: shared=True tensors, replicated
    parameters) and its own seed (an HMAC of the secret, the call and the rank), never a peer's: what a rank
    draws for itself cannot be rebuilt by another rank, whatever it reads in its own process."""

    def __init__(self):
        self.secret = secrets.token_bytes(32)
        self.rng = random.Random(int.from_bytes(hmac.new(self.secret, b"choices", "sha256").digest()[:8], "little"))

    def __call__(self, *key) -> int:
        digest = hmac.new(self.secret, repr(key).encode(), "sha256").digest()
        return int.from_bytes(digest[:8], "little") >> 2

    def for_rank(self, key: tuple, rank: int) -> list[int]:
        """[the call's shared seed, this rank's own seed]."""
        return [self(*key, "shared"), self(*key, "rank", rank)]


class _JobRun:
    """One job through its phases, a step at a time, so that the two jobs of a launch can take turns batch by
    batch (`_interleaved`) or run one after the other (`_run_job`). `calls` gives a timed batch's calls
    from the ranks' warm-up replies (the reference's decide; a candidate's are never read: its job is given the
    count the reference's chose)."""

    def __init__(self, spec: JobSpec, plan: Plan, calls: Callable[[list[dict]], int], cluster: Cluster | None):
        self.spec, self.plan, self.calls = spec, plan, calls
        self.job = ClusterJob(cluster, spec) if cluster else Job(spec)
        self.findings: list[Finding] = []
        self.result = JobResult([], self.job.out_dir, self.findings)
        self.n = 0

    def open(self) -> None:
        """Start the job; its correctness trials (each rank gets its own seeds only: the channels are in rank
        order) and its warm-up, which sets the calls of a timed batch."""
        job, plan = self.job, self.plan
        self.result.span["started"] = time.monotonic()
        job.start()
        for reply in job.gather():
            self.findings += _said(reply)
        if plan.correctness:
            job.send_each(lambda rank: dict(phase="correctness", seeds=plan.for_rank(plan.correctness, rank)))
            for rank, reply in enumerate(job.gather()):
                self.findings += _said(reply)
                if self.spec.role == "reference":  # the scorer trusts the reference's alone (_trusted_checks)
                    for i, pair in enumerate(reply.get("fingerprints", [])):
                        self.result.fingerprints[f"trial{i}-rank{rank}"] = pair
        warmup: list[dict] = []
        if plan.warmup:
            graph = plan.graphs and plan.batches > 0
            with _graph_phase(graph):
                job.send_each(lambda rank: dict(phase="warmup", seeds=plan.for_rank(plan.warmup, rank), graph=graph))
                warmup = job.gather()
        self.n = self.calls(warmup) if plan.batches else 0
        self.result.span["ready"] = time.monotonic()

    def batches(self) -> range:
        """The timed batches' numbers; batch 0 settles (the allocator's pool grows to it, the clocks wake):
        checked, never timed."""
        return range(self.plan.batches + 1 if self.plan.batches else 0)

    def stage(self, b: int) -> None:
        """A batch's inputs made; with graphs, its calls captured first and their seeds sent only then."""
        keys = self.plan.timed(b, self.n)
        seeds = partial(self.plan.for_rank, keys)
        if not self.plan.graphs:
            self.job.send_each(lambda rank: dict(phase="timed", batch=b, seeds=seeds(rank)))
            self.job.gather()
            return
        with _graph_phase(True), _bounded(self.job, GRAPH_STAGING_S, f"batch {b}'s capture of {self.n} calls"):
            self.job.send_all(phase="timed", batch=b, graph=True, calls=self.n,
                              stacks_after_s=GRAPH_STAGING_S - STACKS_BEFORE_S)
            self.job.gather()
            self.job.send_each(lambda rank: dict(phase="fill", seeds=seeds(rank)))
            self.job.gather()

    def time(self, b: int) -> None:
        started, t0 = time.monotonic(), time.perf_counter()
        self.job.send_all(phase="go")
        with _graph_phase(self.plan.graphs):
            replies = self.job.gather()
        wall = time.perf_counter() - t0
        seconds = _reported(replies, wall, self.findings)  # the slowest rank's batch
        if b > 0:
            self.result.clocks.append(BatchClock(wall, seconds, self.n))
            self.result.samples.append(seconds / self.n)
            self.result.starts.append(started)

    def dump(self, b: int) -> None:
        checked = self.plan.checked(b, self.n)
        self.result.checked += [f"timed{b}-{i}" for i in checked]
        self.job.send_all(phase="dump", batch=b, indices=checked)
        with _graph_phase(self.plan.graphs):
            replies = self.job.gather()
        for reply in replies:
            self.findings += _said(reply)

    def close(self) -> None:
        job = self.job
        job.finish()
        self.result.span["ended"] = time.monotonic()
        if job.leftovers and self.spec.role == "candidate":
            self.findings.append(_integrity(f"{job.leftovers} process(es) of the candidate were still running "
                                            f"after its job ended"))
        self.result.findings = sorted({f.message: f for f in self.findings}.values(), key=lambda f: f.message)


def _run_job(spec: JobSpec, plan: Plan, calls: Callable[[list[dict]], int], cluster: Cluster | None,
             cleanup: list[str]) -> JobResult:
    """One job through all its phases, alone on the machine; its folder goes into `cleanup` at once, so that a
    job that fails leaves none behind."""
    run = _JobRun(spec, plan, calls, cluster)
    cleanup.append(run.result.out_dir)
    try:
        run.open()
        for b in run.batches():
            run.stage(b)
            run.time(b)
            run.dump(b)
        return run.result
    finally:
        run.close()


@dataclass
class Turns:
    """What a launch whose jobs took turns gives back: each job's result, the reference's outputs (read into this
    process, and off the disk, after each of its steps), the largest of its files, and the CPU seconds the
    candidate's processes ran while they were stopped for each of the reference's turns."""
    jobs: dict[str, JobResult]
    ref_outputs: dict[str, list]
    largest: int
    ran_while_stopped: list[float]


def _interleaved(specs: dict[str, JobSpec], plan: Plan, calls: Callable[[str], Callable[[list[dict]], int]],
                 cleanup: list[str], timeout: float) -> Turns:
    """Both jobs of a launch alive at once, their timed batches taking turns (which job goes first in each pair
    drawn from the secret generator), so that a drift of the machine's speed (a host's CPU shared with other
    tenants moved world-size-1 batches by 30-60% within one process) slows both alike. A job's turn is its
    batch's staging, timing and saving, in one; the other job is stopped from outside the whole while (SIGSTOP
    to each of its processes), and how long the candidate's processes ran anyway is measured. The reference's
    saved outputs are read into this process and deleted after each of its turns, before the candidate runs
    again. The reference opens first: its warm-up sets the batch's calls."""
    runs = {role: _JobRun(specs[role], plan, calls(role), None) for role in ("reference", "candidate")}
    cleanup += [run.result.out_dir for run in runs.values()]
    turns = Turns({}, {}, 0, [])

    def turn(role: str, *steps: Callable[[], None]) -> None:
        other = "candidate" if role == "reference" else "reference"
        runs[other].job.pause()
        try:
            for step in steps:
                step()
            if role == "reference":
                outputs, size = _load_outputs(runs["reference"].result.out_dir, timeout, remove=True)
                turns.ref_outputs.update(outputs)
                turns.largest = max(turns.largest, size)
        finally:
            if other == "candidate":
                turns.ran_while_stopped.append(runs[other].job.ran_while_stopped())
            runs[other].job.resume()
    try:
        turn("reference", runs["reference"].open)
        turn("candidate", runs["candidate"].open)
        for b in runs["reference"].batches():
            pair = ("reference", "candidate") if plan.seeds.rng.random() < 0.5 else ("candidate", "reference")
            for role in pair:
                run = runs[role]
                turn(role, partial(run.stage, b), partial(run.time, b), partial(run.dump, b))
        turns.jobs = {role: run.result for role, run in runs.items()}
        return turns
    finally:
        for run in runs.values():
            run.close()


def _integrity(text: str, rank: int | None = None, call: str | None = None) -> Finding:
    return Finding(Status.INTEGRITY, rank, text, call=call)


def _said(reply: dict) -> list[Finding]:
    """A rank's findings about itself, or one naming a reply its process rewrote into something else."""
    items = heard(reply)
    if items is None:
        return [_integrity("a rank's reply was not the harness's (its findings)")]
    return [_integrity(text, call=call) for call, text in items]


def _reported(replies: list[dict], wall: float, findings: list[Finding]) -> float:
    """The slowest rank's time for a batch, as the ranks reported it. A reply that is not a list of seconds
    (its process rewrote the channel) is an integrity finding, and the batch counts at the scorer's own clock."""
    times = []
    for r in replies:
        try:
            seconds = sum(float(x) for x in r["seconds"])
        except (KeyError, TypeError, ValueError):
            findings.append(_integrity("a rank's timing reply was not the harness's (seconds of its batch)"))
            return wall
        times.append(seconds if math.isfinite(seconds) and seconds >= 0 else wall)
    return max(times)


def _load_outputs(out_dir: str, timeout: float, remove: bool = False) -> tuple[dict[str, list], int]:
    """The reference job's saved outputs, by call and rank, and the largest file's size (read as carefully as
    the candidate's: the same reader, though no candidate ran in that job); with `remove`, each file is
    deleted once read."""
    deadline, outputs, largest = time.monotonic() + timeout, {}, 0
    folder = saved.open_folder(out_dir)
    try:
        for f in os.listdir(folder):
            data = saved.read_bytes(folder, f, 1 << 40, deadline)
            largest = max(largest, len(data))
            outputs[f[:-3]] = saved.parse(data, f)
            if remove:
                os.unlink(f, dir_fd=folder)
    finally:
        os.close(folder)
    return outputs, largest


def _trusted_checks(name: str, rank: int, outputs: list, inputs: list, ref: JobResult) -> list[Finding]:
    """A candidate's trial judged here, from the tensors its rank held after the call: inputs changed (their
    fingerprint against the one the reference job took before its own call), outputs sharing an input's memory
    (the file keeps shared memory shared). What the reference itself does is no violation."""
    found = []
    before, after = ref.fingerprints.get(f"{name}-rank{rank}", [None, None])
    if before is not None and before == after and fingerprint(inputs) != before:
        found.append(_integrity("the candidate modified its inputs", rank, name))
    allowed = {f.text for f in ref.findings}
    for i in aliased_outputs(tuple(outputs), inputs):
        if f"output {i} aliases an input" not in allowed:
            found.append(_integrity(f"output {i} aliases an input", rank, name))
    return found


def _compare_outputs(task: TaskSpec, cand_dir: str, ref: JobResult, ref_outputs: dict, names: list[str],
                     nproc: int, limit: int, timeout: float) -> tuple[list[Finding], list[Finding]]:
    """Per checked call and rank: the first mismatch of each failing one (or what lay where an output should
    be: integrity); and what the scorer saw of the candidate's behaviour in its trials (`_trusted_checks`)."""
    failures, behaviour, deadline = [], [], time.monotonic() + timeout
    try:
        folder = saved.open_folder(cand_dir)
    except saved.SavedFileProblem as e:
        return [_integrity(str(e))], []
    try:
        for name in names:
            for rank in range(nproc):
                wrong = partial(Finding, Status.INCORRECT, rank, call=name)
                try:
                    c = saved.load(folder, f"{name}-rank{rank}.pt", limit, deadline)
                except FileNotFoundError:
                    failures.append(wrong("no output saved"))
                    continue
                except saved.SavedFileProblem as e:
                    failures.append(_integrity(str(e), rank, name))
                    continue
                except ValueError as e:
                    failures.append(wrong(str(e)))
                    continue
                if name.startswith("trial"):
                    if not (isinstance(c, dict) and isinstance(c.get("outputs"), list)
                            and isinstance(c.get("inputs"), list)):
                        failures.append(_integrity("the saved file is not the harness's (outputs and inputs)",
                                                   rank, name))
                        continue
                    behaviour += _trusted_checks(name, rank, c["outputs"], c["inputs"], ref)
                    c = c["outputs"]
                r = ref_outputs[f"{name}-rank{rank}"]
                if not isinstance(c, list) or len(c) != len(r):
                    n = len(c) if isinstance(c, list) else type(c).__name__
                    failures.append(wrong(f"{n} outputs, expected {len(r)}"))
                    continue
                for spec, o, want in zip(task.outputs, c, r):
                    msg = compare(o, want, spec)
                    if msg:
                        failures.append(wrong(msg))
                        break
    finally:
        os.close(folder)
    return failures, behaviour


@dataclass(frozen=True)
class ScoreRequest:
    """What to score: a candidate file against a task's reference, with `nproc` ranks on each node."""
    task: str                 # task slug or id
    candidate: str            # the candidate's file
    nproc: int
    backend: str = "nccl"     # or "gloo" (the CPU)
    label: str | None = None  # the leaderboard's group (default: the candidate's folder)


@dataclass(frozen=True)
class ScoreOptions:
    """Where a score is recorded and who hears of it: `store` what it is recorded into (recorder.py: the shell's
    results file; with `resume`, a stored result for the same file, task and size is returned instead of scoring
    again), `progress` a line per step, `cluster` node 0's session with the other nodes (then each job runs
    `nproc` ranks on every node of it)."""
    store: Recorder | None = None
    resume: bool = False
    progress: Callable[[str], None] | None = None
    cluster: Cluster | None = None


def gloo_rank_bound() -> int:
    """The most gloo ranks one node may run: GLOO_RANKS_PER_CORE per CPU core, and never above GLOO_MAX_RANKS."""
    return min(defaults.GLOO_MAX_RANKS, defaults.GLOO_RANKS_PER_CORE * (os.cpu_count() or 1))


def score(request: ScoreRequest, protocol: Protocol = Protocol(),
          options: ScoreOptions = ScoreOptions()) -> ScoreResult:
    """Score one candidate file against a task's reference (status correct instead of faster/slower when the
    protocol is correctness_only). ValueError for a gloo rank count above gloo_rank_bound()."""
    task, candidate, nproc, backend = get(request.task), request.candidate, request.nproc, request.backend
    if backend == "gloo" and not 1 <= nproc <= gloo_rank_bound():
        raise ValueError(f"{nproc} gloo ranks per node: the bound on this machine is {gloo_rank_bound()} "
                         f"({defaults.GLOO_RANKS_PER_CORE} per CPU core, at most {defaults.GLOO_MAX_RANKS})")
    world = nproc * (options.cluster.nnodes if options.cluster else 1)
    become_subreaper()
    store = options.store
    if store and options.resume:
        done = store.completed(task.slug, candidate, world, backend, timed=not protocol.correctness_only)
        if done:
            return done
    run_id = uuid.uuid4().hex[:12]
    label = request.label or os.path.basename(os.path.dirname(os.path.abspath(candidate)))
    if store:
        store.start(run_id, task.slug, os.path.abspath(candidate), label, world, backend)
    scoring = _Scoring(task, request, protocol, options, world, store, ScoreResult(run_id, task.slug))
    try:
        try:
            return scoring.run()
        except GraphsFailed as e:
            scoring.say(f"timed again without CUDA graphs: {e.message}")
            scoring = _Scoring(task, request, replace(protocol, graphs=False), options, world, store,
                               ScoreResult(run_id, task.slug), scoring.cleanup, f"eager (CUDA graphs: {e.message})",
                               e.details)
            return scoring.run()
    except JobFailure as e:
        scoring.result.status = e.kind.status
        scoring.result.findings.append(Finding(e.kind, e.rank, e.message, e.details))
        return scoring.result
    finally:
        for d in scoring.cleanup:
            shutil.rmtree(os.path.dirname(d), ignore_errors=True)
        if store:
            store.finish(scoring.result)


class _Scoring:
    """One score's steps, in the order `run` takes them: each launch runs both jobs (`launch`), records every
    checked call's outcome (`record_trials`), judges what the candidate did (`behaviour`) and its clocks
    (`clocks`); after the last launch, the speed-up and its status (`verdict`)."""

    def __init__(self, task: TaskSpec, request: ScoreRequest, protocol: Protocol, options: ScoreOptions,
                 world: int, store: Recorder | None, result: ScoreResult, cleanup: list[str] | None = None,
                 timed_as: str = "", graphs_log: str = ""):
        self.task, self.request, self.protocol, self.options = task, request, protocol, options
        self.world, self.store, self.result = world, store, result
        self.seeds, self.say = Seeds(), (options.progress or (lambda msg: None))
        self.began = time.monotonic()
        self.chosen = [protocol.calls] if protocol.calls else []  # a timed batch's calls: given, or the reference's pick
        self.ref_s: list[list[float]] = []
        self.cand_s: list[list[float]] = []
        self.cleanup: list[str] = [] if cleanup is None else cleanup
        # how the batches were timed, for the JSON: "cuda graphs", "eager", or why graphs asked for were not used
        self.timed_as = timed_as or ("cuda graphs" if protocol.graphs else "eager")
        self.graphs_log = graphs_log  # the failed graph phase's job log tail, where it had one
        self.unreported, self.hideable, self.batches = 0.0, 0.0, []
        self.jobs: list[dict] = []  # each job's span: started, ready to time, ended (seconds into the score)
        # every launch's timed batches so far, judged together (clocks): a clock finding stands on all of them
        self.ref_clocks: list[BatchClock] = []
        self.cand_clocks: list[BatchClock] = []
        self.clock_findings: list[Finding] = []
        self.cheated = False  # a finding of the candidate's own behaviour, in any launch so far
        # both jobs of a launch alive, batches taking turns (Protocol.interleave): only where each job has a sandbox
        # of its own (its own PID namespace and files: neither can see the other's processes or outputs), on one node
        self.interleave = protocol.interleave and not options.cluster and sandbox.wanted() \
            and not protocol.correctness_only

    def run(self) -> ScoreResult:
        protocol, result = self.protocol, self.result
        if self.options.cluster:
            self.say(f"waiting for the other {self.options.cluster.nnodes - 1} node(s)")
            self.options.cluster.wait_for_nodes(self.request.nproc)
        launches, launch = protocol.timed_launches, 0
        while launch < launches:
            if not self.launch(launch, launches):
                return result
            launch += 1
            if launch == launches == protocol.launches and protocol.confirm and not protocol.correctness_only:
                # faster so far, or a clock finding so far: either must stand over as many launches again
                why = "faster" if summarize(self.ref_s, self.cand_s, self.hideable, self.interleave).faster \
                    else "a clock finding" if self.clock_findings else ""
                if why:
                    launches += protocol.launches
                    self.say(f"{why} over {launch} launches: {protocol.launches} more to confirm it")
        result.correct = True
        result.findings += self.clock_findings
        if protocol.correctness_only:
            result.status = Status.INTEGRITY if result.integrity else Status.CORRECT
            return result
        return self.verdict()

    def batch_calls(self, role: str, replies: list[dict]) -> int:
        if not self.chosen:  # the first launch runs the reference first: its warm-up decides, never a candidate's
            assert role == "reference", "a candidate's job ran before the reference chose the batch size"
            self.chosen.append(calls_per_batch([WarmupReport.from_reply(r) for r in replies], self.request.backend,
                                                self.protocol.graphs))
            self.say(f"timed batches of {self.chosen[0]} calls")
        return self.chosen[0]

    def launch(self, launch: int, launches: int) -> bool:
        """Both jobs of one launch, judged; False when the score ended here (wrong outputs)."""
        plan = self.protocol.plan(self.seeds, launch)
        # alternate which job goes first (order effects cancel); the reference's outputs are read
        # into this process and deleted before the candidate runs, so it can never read them
        order = ("reference", "candidate") if launch % 2 == 0 else ("candidate", "reference")
        specs = {role: JobSpec(role, self.task.slug, self.request.nproc, self.request.backend, self.protocol.timeout,
                               self.protocol.preset, self.request.candidate if role == "candidate" else None)
                 for role in order}
        jobs, ref_outputs, largest = {}, {}, 0
        if self.interleave:
            self.say(f"launch {launch + 1}/{launches}: reference and candidate, batches taking turns")
            turns = _interleaved(specs, plan, lambda role: partial(self.batch_calls, role), self.cleanup,
                                 self.protocol.timeout)
            jobs, ref_outputs, largest = turns.jobs, turns.ref_outputs, turns.largest
            shutil.rmtree(os.path.dirname(jobs["reference"].out_dir), ignore_errors=True)
            ran = max(turns.ran_while_stopped, default=0.0)
            if ran > RAN_WHILE_STOPPED_S:
                jobs["candidate"].findings.append(_integrity(
                    f"the candidate's processes ran {ran * 1e3:.1f} ms of CPU time while stopped for a turn of the "
                    f"reference (something restarted them, or a thread of theirs did not stop)"))
        for role in order:
            if role not in jobs:
                self.say(f"launch {launch + 1}/{launches}: {role}")
                jobs[role] = _run_job(specs[role], plan, partial(self.batch_calls, role), self.options.cluster,
                                      self.cleanup)
                if role == "reference":
                    ref_outputs, largest = _load_outputs(jobs[role].out_dir, self.protocol.timeout)
                    shutil.rmtree(os.path.dirname(jobs[role].out_dir), ignore_errors=True)
        cand, ref = jobs["candidate"], jobs["reference"]
        names = [f"trial{i}" for i in range(len(plan.correctness))] + cand.checked
        failures, seen_here = _compare_outputs(self.task, cand.out_dir, ref, ref_outputs, names, self.world,
                                               saved.limit_for([largest]), self.protocol.timeout)
        if self.protocol.graphs and failures and all((f.call or "").startswith("timed") for f in failures):
            raise GraphsFailed(f"the candidate's outputs of a replayed call were wrong ({failures[0].message}), "
                               f"its correctness trials right")
        self.record_trials(launch, names, failures)
        behaviour = self.behaviour(cand, ref, seen_here)
        self.result.findings += behaviour
        self.cheated = self.cheated or bool(behaviour)
        self.clocks(launch, order, jobs)
        self.jobs += [dict(launch=launch, role=role, **{f"{k}_s": round(t - self.began, 3)
                                                         for k, t in jobs[role].span.items()}) for role in order]
        if failures:
            self.result.findings += self.clock_findings + failures[:8]
            # wrong outputs of a candidate seen cheating (work left running, inputs changed, the harness
            # patched): integrity names why; the clock check, noisy on a loaded machine, does not decide it
            planted = any(f.kind == Status.INTEGRITY for f in failures)  # a FIFO, a link... at an output's place
            self.result.status = Status.INTEGRITY if self.cheated or planted else Status.INCORRECT
            return False
        self.ref_s.append(ref.samples)
        self.cand_s.append(cand.samples)
        return True

    def record_trials(self, launch: int, names: list[str], failures: list[Finding]) -> None:
        """Each checked call on each rank: right, or its first mismatch."""
        for name in names:
            for rank in range(self.world):
                bad = [f for f in failures if f.rank == rank and f.call == name]
                check = TrialCheck(launch, name, rank, not bad, bad[0].message if bad else "")
                self.result.trials.append(check)
                if self.store:
                    self.store.trial(self.result.run_id, f"launch{launch}", names.index(name), rank, check.ok,
                                     check.message)

    def behaviour(self, cand: JobResult, ref: JobResult, seen_here: list[Finding]) -> list[Finding]:
        """This launch's new findings of the candidate's behaviour: what its ranks said of themselves, less what
        the reference itself does (no violation), and the scorer's own look where the ranks were silent."""
        seen = {f.message for f in self.result.findings}
        allowed = {f.text for f in ref.findings}
        found = [f for f in cand.findings if f.message not in seen and f.text not in allowed]
        said = {f.message for f in found} | seen
        return found + [f for f in seen_here if f.message not in said]

    def clocks(self, launch: int, order: tuple[str, str], jobs: dict[str, JobResult]) -> None:
        """The candidate's times against the scorer's own clock, over every launch's batches so far (a patched
        clock shows in every batch; one launch's few batches, one of them preempted on a loaded machine, made
        identical code "integrity"), and every timed batch kept for the JSON."""
        ref, cand = jobs["reference"], jobs["candidate"]
        self.ref_clocks += ref.clocks
        self.cand_clocks += cand.clocks
        check = cross_check(self.ref_clocks, self.cand_clocks, self.request.backend)
        self.clock_findings = [_integrity(m) for m in check.findings]
        self.unreported, self.hideable = check.unexplained, check.tolerance
        self.batches += [dict(launch=launch, role=role, batch=i + 1, at_s=at - self.began, wall_ms=b.wall * 1e3,
                              reported_ms=b.reported * 1e3, calls=b.calls)
                         for role in order for i, (b, at) in enumerate(zip(jobs[role].clocks, jobs[role].starts))]

    def verdict(self) -> ScoreResult:
        """The speed-up over every launch, its interval and margin, and the status they give."""
        result = self.result
        stats = summarize(self.ref_s, self.cand_s, self.hideable, self.interleave)
        result.speedup, result.speedup_ci95, result.noise_margin = stats.speedup, stats.ci95, stats.noise_margin
        result.reference_ms, result.candidate_ms = stats.reference_ms, stats.candidate_ms
        result.clock_check = ClockSummary(self.unreported, self.hideable, self.batches, self.interleave, self.timed_as,
                                           self.graphs_log, self.jobs)
        if result.speedup > IMPLAUSIBLE_SPEEDUP:
            result.findings.append(_integrity(f"speed-up {result.speedup:.1f}x is above the plausibility "
                                              f"limit of {IMPLAUSIBLE_SPEEDUP:g}x: review by hand"))
        if result.integrity:
            result.status = Status.INTEGRITY
        else:
            result.status = Status.FASTER if stats.faster else Status.SLOWER
        return result
