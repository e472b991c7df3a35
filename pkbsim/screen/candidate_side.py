"""What runs in the candidate's own process (isolation.py): its build, its calls on the simulated world and
its full-size shape run.

Everything a candidate can tamper with lives here and dies with the process. What leaves is a
`CandidateReport` of plain data: every call's outputs and a digest of its inputs as it left them, the simulator's findings, what the run showed about
the candidate's own code (an exception raised in it, a loop, a fatal protocol finding), the limits of pkb
it met, and its traces. The reference's outputs never enter this process; the comparison and the verdict
are the parent's (pipeline.py), so a candidate that patches them patches a copy nobody reads; so is the
judgement of whether a call changed its inputs (against the inputs the parent made for the reference).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from pkbsim.cuda.build_clock import BUILD_CLOCK
from pkbsim.screen.candidate import RecordedLimit, Session, extension_stand_in, loader
from pkbsim.screen.cost import SHAPE_RUN_SECONDS, shape_trace
from pkbsim.screen.functional import TRIALS, candidate_calls, slow
from pkbsim.screen.hang import Watch, site
from pkbsim.screen.limits import limit_of, own_site
from pkbsim.screen.plain import plain
from pkbsim.screen.prebuild import prebuild
from pkbsim.screen.result import Reason, ReasonKind
from pkbsim.taskrun import Call, TaskRun, run_calls
from pkbsim.world.findings import Finding, is_fatal
from tasks.parallelkernelbench.naming import Checkout
from tasks.registry import TaskSpec


@dataclass
class CandidateJob:
    """What the child needs to screen one candidate (JSON: it crosses to a pool worker's zygote, which reads the
    checkout from it to register its problems before it forks)."""
    task: str
    candidate: str  # absolute path
    world_size: int
    seed: int
    timeout: float
    build_timeout: float
    cost: bool
    checkout: Checkout | None = None  # a ParallelKernelBench checkout whose problems the task may be one of
    read_only: tuple = ()  # folders the trusted side writes (timelines): read-only to the candidate's process
    own_cache: str = ""    # its per-candidate build cache (the only one its process sees), made by the trusted side
    fresh_trial: int = -1  # >= 0: only this trial's inputs, one call in a fresh world (functional.fresh_call)
    # the sizes stage (sizes.py): [m, n] base shapes to run one call at each, in order, while `sizes_budget`
    # seconds last; the screen-size call's seconds predict the first run's, and the digest of trial 0's
    # inputs at screen size (rank 0) tells a problem whose inputs do not grow with the size
    sizes: list = field(default_factory=list)
    sizes_budget: float = 0.0
    screen_call_s: float = 0.0
    screen_digest: str = ""

    def to_json(self) -> dict:
        return asdict(self)  # the checkout as {root, dtype}

    @classmethod
    def from_json(cls, doc: dict) -> CandidateJob:
        return cls(**dict(doc, checkout=Checkout.from_json(doc.get("checkout"))))


@dataclass
class CandidateReport:
    outputs: list = field(default_factory=list)         # per call, per rank: outputs (None: did not return)
    aliased: list = field(default_factory=list)         # per call, per rank: outputs sharing memory with inputs
    input_digests: list = field(default_factory=list)   # per call, per rank: digest of the inputs after the call
    findings: list[Finding] = field(default_factory=list)  # the simulator's findings
    reasons: list = field(default_factory=list)         # Reasons: the candidate's faults the run showed
    limit: Reason | None = None                         # pkb's limit that left the run inconclusive
    problems: list = field(default_factory=list)        # Reasons: the file cannot become a candidate
    not_simulated: list = field(default_factory=list)   # pkb's limits met while loading or calling
    compile: dict = field(default_factory=dict)         # nvcc report per inline-CUDA extension
    solution_site: str = ""
    screen_trace: dict | None = None  # the first call after the warm-up, at screen size (with `cost`)
    shape_trace: dict | None = None   # the same at full size, from a shape run, when one could run
    shape_why: str = ""               # why there is no shape_trace
    sized: list = field(default_factory=list)  # the sizes stage's runs: {m, n, trial, seconds, outputs}
    sizes_note: str = ""                       # why the sizes stage stopped before its last size
    seconds: dict = field(default_factory=dict)  # build, functional, shape

    def to_payload(self) -> dict:
        return dict(asdict(self), reasons=[r.to_json() for r in self.reasons],
                    problems=[r.to_json() for r in self.problems], limit=self.limit.to_json() if self.limit else None)

    @classmethod
    def from_payload(cls, d: dict) -> CandidateReport:
        d = dict(d)
        d["findings"] = [Finding(**f) for f in d.get("findings", [])]
        d["reasons"] = [Reason.from_json(r) for r in d.get("reasons", [])]
        d["problems"] = [Reason.from_json(r) for r in d.get("problems", [])]
        d["limit"] = Reason.from_json(d["limit"]) if d.get("limit") else None
        return cls(**d)


def prepare(checkout: Checkout | None) -> None:
    """Make a job's task known in this process (a zygote does it before it forks: once per checkout)."""
    if checkout:
        from pkbsim.screen.parallelkernelbench import register_parallelkernelbench_tasks
        register_parallelkernelbench_tasks(checkout.root, dtype=checkout.dtype)


def run_job(job_json: dict) -> dict:
    """The child's entry: screen the candidate's side of one job; its report as a payload."""
    from tasks.registry import get

    job = CandidateJob.from_json(job_json)
    prepare(job.checkout)
    return candidate_side(get(job.task), job).to_payload()


def candidate_side(task: TaskSpec, job: CandidateJob) -> CandidateReport:
    rep = CandidateReport()
    session = Session(job.candidate)
    with extension_stand_in(session):
        t0 = time.perf_counter()
        prebuild(session, task.reference, job.build_timeout)
        rep.seconds["build"] = round(time.perf_counter() - t0, 3)
        t0, built0 = time.perf_counter(), BUILD_CLOCK.total
        load = loader(session, task.reference)
        try:
            (_sizes if job.sizes else _calls)(task, session, job, load, rep)
        finally:
            # extensions built lazily (on the first call) are built with the world's watchdog paused: their
            # time is build time, not the functional stage's
            built = BUILD_CLOCK.total - built0
            rep.seconds["build"] = round(rep.seconds["build"] + built, 3)
            rep.seconds["functional"] = round(time.perf_counter() - t0 - built, 3)
        rep.compile = {name: r.to_json() for name, r in session.reports.items()}
        rep.problems = [Reason(p.kind, str(p), p.site) for p in session.problems]
        rep.not_simulated = sorted(session.not_simulated)
        rep.solution_site = session.solution_site
        if job.cost and job.fresh_trial < 0 and not job.sizes and not (rep.problems or rep.not_simulated or rep.limit
                                                      or _decisive(rep.reasons)):
            t0 = time.perf_counter()
            if session.mentions("triton.jit"):
                rep.shape_why = "the candidate launches Triton kernels"
            elif session.reports:
                rep.shape_why = "the candidate launches inline-CUDA kernels"
            else:
                rep.shape_trace, rep.shape_why = shape_trace(task, load, job.world_size, job.seed, "full",
                                                             min(job.timeout, SHAPE_RUN_SECONDS))
            rep.seconds["shape"] = round(time.perf_counter() - t0, 3)
    return rep


def _calls(task: TaskSpec, session: Session, job: CandidateJob, load, rep: CandidateReport) -> None:
    """The candidate's calls at screen size (functional.candidate_calls); what they showed, into `rep`."""
    calls = candidate_calls(load) if job.fresh_trial < 0 else [Call(job.fresh_trial, load=load, poison=True)]
    with Watch() as watch:
        run = run_calls(task, calls, job.world_size, seed=job.seed, timeout=job.timeout, record_compute=job.cost,
                        keep_inputs=False)
    rep.findings = list(run.result.findings)
    rep.outputs = [[plain(o) for o in c.outputs] for c in run.calls]
    rep.aliased = [c.aliased for c in run.calls]
    rep.input_digests = [[d and d[1] for d in c.digests] for c in run.calls]
    # the session's own limits are recorded where they are raised
    for lim in filter(None, (limit_of(r.error) for r in run.raised if not isinstance(r.error, RecordedLimit))):
        session.limit(lim)
    if session.problems or session.not_simulated:
        return
    if run.result.verdict == "timeout":
        rep.limit = slow(run, watch, session, job.timeout)
        if rep.limit is None:
            spot = watch.candidate_loop(session.path)
            rep.reasons = [Reason(ReasonKind.TIMEOUT, f"no result after {job.timeout:g} s: the candidate's code loops "
                                                      f"outside any simulated wait", site(spot) if spot else "")]
    elif run.result.verdict == "error":
        rep.reasons, rep.limit = _errors(run, session)
    elif run.result.verdict != "ok":
        rep.reasons = [Reason(f.kind, f.message + _calls_of(f), f.sites[0] if f.sites else "", f.between_calls)
                       for f in run.result.findings if is_fatal(f)][:3]
    if job.cost and len(run.calls) > 1 and run.calls[1].complete and not (rep.limit or _decisive(rep.reasons)):
        rep.screen_trace = run.calls[1].trace(task, "screen")


def _sizes(task: TaskSpec, session: Session, job: CandidateJob, load, rep: CandidateReport) -> None:
    """The sizes stage's runs (sizes.py): one call on trial 0's inputs at each size of `job.sizes` in a world of its
    own, while the budget lasts; each run's time, scaled by the base shape's elements, predicts the next one's
    (the first from the screen-size call, unscaled: see below). A problem whose inputs do not grow (every size's inputs repeat trial
    0's at screen size: digest and shapes) then runs further draws at the last size: the benchmark's trials 3
    and 4, which the screen has not run, each in a fresh world as the benchmark runs a trial; then fresh draws
    (pkb's scorer draws its own inputs) back to back in one world, up to LAST_DRAW, DRAW_BYTES of outputs and
    the budget. A run that meets a limit of pkb, or that the budget cuts short, ends the stage with a note; a
    fault of the candidate's own ends it with its reason."""
    from pkbsim.screen.sizes import DRAW_BYTES, LAST_DRAW, LAST_TRIAL, describe, elements, nbytes

    spent, last_s, last_n = 0.0, job.screen_call_s, elements(None)
    seen, fixed, size, digest = {job.screen_digest} - {""}, True, None, None

    def one(trials: list[int], predicted: float, what: str) -> bool:
        """Run `trials` at `size` in one world; False when the stage ends here (note or reason recorded)."""
        nonlocal spent, digest
        if spent + predicted > job.sizes_budget:
            rep.sizes_note = (f"{what} not run: predicted {predicted:.1f} s, beyond the stage's budget of "
                              f"{job.sizes_budget:g} s ({spent:.0f} s spent)")
            return False
        t0 = time.perf_counter()
        limit_s = min(job.timeout, max(job.sizes_budget - spent, 1.0))   # a size's cost may grow faster than its elements
        run = run_calls(task, [Call(t, load=load, poison=True) for t in trials], job.world_size, seed=job.seed,
                        timeout=limit_s, keep_inputs=False, shape_run=False, size={"m": size[0], "n": size[1]})
        took = time.perf_counter() - t0
        spent += took
        digest = (run.calls[0].digests[0] or (None,))[0] if run.calls else None
        for lim in filter(None, (limit_of(r.error) for r in run.raised if not isinstance(r.error, RecordedLimit))):
            session.limit(lim)
        if session.problems or session.not_simulated:
            rep.sizes_note = f"{what}: {'; '.join(sorted(session.not_simulated)) or 'the file did not load'}"
            session.not_simulated.clear()
            session.problems.clear()
            return False
        reasons, limit = [], None
        if run.result.verdict == "timeout":
            # cut by the budget, never the candidate's fault here (a loop that is only slow at a larger size)
            limit = Reason(ReasonKind.TIME_LIMIT, f"cut after {limit_s:.0f} s, the stage's budget")
        elif run.result.verdict == "error":
            reasons, limit = _errors(run, session)
        elif run.result.verdict != "ok":
            reasons = [Reason(f.kind, f.message + _calls_of(f), f.sites[0] if f.sites else "")
                       for f in run.result.findings if is_fatal(f)][:3]
        done = [(t, c) for t, c in zip(trials, run.calls) if c.complete]
        for t, c in done:
            rep.sized.append({"m": size[0], "n": size[1], "trial": t, "seconds": round(took / len(trials), 3),
                              "outputs": [plain(o) for o in c.outputs]})
        if reasons:
            first = trials[len(done)] if len(done) < len(trials) else trials[-1]
            rep.reasons = [Reason(r.kind, f"at {describe(size)}, trial {first}: {r.message}", r.site,
                                  first > LAST_TRIAL) for r in reasons]
            rep.findings = list(run.result.findings)
            return False
        if limit is not None or len(done) < len(trials):
            rep.sizes_note = f"{what}: {limit.message if limit else 'a rank did not return'} (not checked)"
            return False
        return True

    for size in job.sizes:
        # the first size costs at least the screen-size call (a lower bound: that call's time also holds the
        # first call's one-time costs, which the stage's process pays again, so a scaled guess skipped sizes that
        # take 1-10 s). Later sizes scale the last run's time by the elements. Every run is cut where the budget
        # ends (Triton 59's contrastive loss took 0.4 s at 64 x 1024 and 84 s at 512 x 512).
        predicted = last_s if not spent or fixed else last_s * elements(size) / last_n
        if not one([0], predicted, describe(size)):
            return
        last_s, last_n = rep.sized[-1]["seconds"], elements(size)
        fixed &= digest is not None and digest in seen
        seen.add(digest)
    if not fixed or size is None:
        return
    for trial in range(TRIALS, LAST_TRIAL + 1):  # the benchmark's trials the screen has not run, each fresh
        if not one([trial], last_s, f"{describe(size)}, trial {trial}"):
            return
    each = max(last_s, 1e-3)
    room = min(int((job.sizes_budget - spent) / each), LAST_DRAW - LAST_TRIAL,
               DRAW_BYTES // max(1, nbytes(rep.sized[-1]["outputs"])))
    if room > 0:
        one(list(range(LAST_TRIAL + 1, LAST_TRIAL + 1 + room)), 0.0, f"{room} draws at {describe(size)}")


def _decisive(reasons: list[Reason]) -> bool:
    """Whether the run showed a fault under every rule set (one under pkb's alone leaves the cost to find)."""
    return any(not r.pkb_only for r in reasons)


def _calls_of(f: Finding) -> str:
    """The calls a race between two calls spans, in the words of a timing loop."""
    if not f.between_calls:
        return ""
    first, then = sorted(set(f.calls))[:2]
    return (f" (between call {first} and call {then}, which followed it with no barrier between them, as a timing "
            f"loop calls it: a barrier before returning keeps a rank's next call out of buffers its peers still use)")


def _errors(run: TaskRun, session: Session) -> tuple[list[Reason], Reason | None]:
    """Reasons for ranks that raised: the candidate's when its own code is on the traceback, else pkb's."""
    errors = [f for f in run.result.findings if f.kind == "error"]
    if not run.raised:
        return [Reason(f.kind, f.message, f.sites[0] if f.sites else "") for f in errors[:3]], None
    first = run.raised[0]
    where = own_site(session.path, first.error)
    message = f"rank {first.rank} raised {type(first.error).__name__}: {first.error}"
    if where is None:
        return [], Reason(ReasonKind.PKB_ERROR, f"{message} (outside the candidate's code: a bug or gap of pkb)")
    return [Reason(ReasonKind.ERROR, message, where)], None
