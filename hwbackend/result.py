"""What a score concludes, as one object: `score()` returns it, the store writes and reads it, `pkb score`
renders it; a `RunRecord` is the store's summary of one scoring run (the leaderboard's and the report's
input). JSON (`to_json`/`from_json`) only where it leaves the process: `pkb score --json`, the results file,
the rows of `pkb run`, `pkb report --json`."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from hwbackend.timing import resolved


class Status(StrEnum):
    """A score's outcome. faster/slower: correct and timed; correct: correct, untimed (correctness-only);
    incorrect: an output differed from the reference's; integrity: correct, but the candidate did something a
    fair kernel does not (or a speed-up beyond belief); error, compile_error, timeout: the job failed."""
    FASTER = "faster"
    SLOWER = "slower"
    CORRECT = "correct"
    INCORRECT = "incorrect"
    INTEGRITY = "integrity"
    ERROR = "error"
    COMPILE_ERROR = "compile_error"
    TIMEOUT = "timeout"

    @property
    def correct(self) -> bool:
        """Correct on hardware: the candidate computed what the reference does (integrity is not)."""
        return self in (Status.FASTER, Status.SLOWER, Status.CORRECT)


RUNNING = "running"  # the store's status of a run that has not finished


class FailureKind(StrEnum):
    """Why a job ended early (JobFailure.kind; the worker's report of its own error is one of the first
    three). The score's status is error for most; its finding keeps the kind."""
    EXCEPTION = "exception"
    CUDA_ERROR = "cuda_error"
    COMPILE_ERROR = "compile_error"
    TIMEOUT = "timeout"
    NODE_FAILURE = "node_failure"
    RESOURCE_LIMIT = "resource_limit"
    ERROR = "error"  # anything else: the launcher exited, a rank died without reporting
    GRAPH_UNAVAILABLE = "graph_unavailable"  # `--graphs`: a batch could not be captured (the score times eagerly)

    @property
    def status(self) -> Status:
        return {FailureKind.COMPILE_ERROR: Status.COMPILE_ERROR, FailureKind.TIMEOUT: Status.TIMEOUT}.get(
            self, Status.ERROR)


@dataclass
class Finding:
    """Something the scorer saw: kind is incorrect, integrity, or the kind of the failure that ended a job
    (timeout, compile_error, cuda_error, exception, node_failure, resource_limit, error); `text` what, `call`
    which call showed it, where one did (the scorer's key of the call: trial0, timed2-5)."""
    kind: Status | FailureKind  # incorrect or integrity (a Status), or why the job failed (a FailureKind)
    rank: int | None
    text: str
    details: str = ""  # a failure's log tail or traceback, where there is one
    call: str | None = None

    def __post_init__(self):
        if not isinstance(self.kind, (Status, FailureKind)):  # read back from JSON: a failure's kind first
            for kinds in (FailureKind, Status):
                if self.kind in kinds._value2member_map_:
                    self.kind = kinds(self.kind)
                    break  # (a kind this version does not know stays its string)

    @property
    def message(self) -> str:
        """The one line a user reads: the call, then what it showed."""
        return f"{self.call}: {self.text}" if self.call else self.text

    def to_json(self) -> dict:
        doc = {"kind": str(self.kind), "rank": self.rank, "message": self.message}
        return doc | ({"call": self.call, "text": self.text} if self.call else {}) | (
            {"details": self.details} if self.details else {})

    @classmethod
    def from_json(cls, doc: dict) -> Finding:
        return cls(doc["kind"], doc.get("rank"), doc.get("text", doc["message"]), doc.get("details", ""),
                   doc.get("call"))


@dataclass
class TrialCheck:
    """One checked call (a correctness trial or a timed call chosen at random) on one rank."""
    launch: int
    call: str     # trial<i> or timed<batch>-<i>
    rank: int
    ok: bool
    message: str  # the first mismatch, "" when ok

    def to_json(self) -> dict:
        return {"launch": self.launch, "call": self.call, "rank": self.rank, "ok": self.ok, "message": self.message}

    @classmethod
    def from_json(cls, doc: dict) -> TrialCheck:
        return cls(doc["launch"], doc["call"], doc["rank"], doc["ok"], doc["message"])


@dataclass
class ClockSummary:
    """The worst launch of the clock cross-check (clock_check.py), as shares of a batch, and every timed batch
    by both clocks: `batches` rows of launch, role, batch (its number in the launch), at_s (when it started,
    seconds into the score), wall_ms (the scorer's clock from "go" to the last "done"), reported_ms (the slowest
    rank's timed region) and calls, so that a noise margin can be traced to its batches; `interleaved`: the two
    jobs of each launch took turns batch by batch; `timed_as`: "eager" (the calls run one after the other in
    the timed region), "cuda graphs" (one replay of the batch's captured calls), or "eager (CUDA graphs: why
    not)" where graphs were asked for and the score was timed again without them; `graphs_log`: then, the end of
    the failed job's log (a capture that never answered writes every thread's stack there); `jobs`: each job's
    launch, role and started_s, ready_s (its correctness trials and warm-up done), ended_s, seconds into the score:
    where a score's wall time went."""
    unexplained: float
    tolerance: float
    batches: list[dict] = field(default_factory=list)
    interleaved: bool = False
    timed_as: str = "eager"
    graphs_log: str = ""
    jobs: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"unexplained": self.unexplained, "tolerance": self.tolerance, "batches": self.batches,
                "interleaved": self.interleaved, "timed_as": self.timed_as} | \
            ({"graphs_log": self.graphs_log} if self.graphs_log else {}) | ({"jobs": self.jobs} if self.jobs else {})


@dataclass
class ScoreResult:
    """A score's result. A result read back from the store (`resumed`) has neither task nor trials, as in
    its JSON; noise_margin and clock_check exist for timed results only."""
    run_id: str
    task: str | None
    status: Status | None = None
    correct: bool = False
    speedup: float | None = None
    speedup_ci95: list[float | None] | None = None
    reference_ms: float | None = None
    candidate_ms: float | None = None
    trials: list[TrialCheck] | None = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    noise_margin: float | None = None
    clock_check: ClockSummary | None = None
    resumed: bool = False

    @property
    def integrity(self) -> bool:
        return any(f.kind == Status.INTEGRITY for f in self.findings)

    @property
    def resolved(self) -> bool | None:
        """Whether the clock told this candidate from the reference (timing.resolved)."""
        return resolved(self.speedup_ci95, self.noise_margin) if self.speedup else None

    def to_json(self) -> dict:
        doc = {"run_id": self.run_id}
        if self.task is not None:
            doc["task"] = self.task
        doc |= {"status": None if self.status is None else self.status.value, "correct": self.correct,
                "speedup": self.speedup, "speedup_ci95": self.speedup_ci95, "reference_ms": self.reference_ms,
                "candidate_ms": self.candidate_ms}
        if self.trials is not None:
            doc["trials"] = [t.to_json() for t in self.trials]
        doc["findings"] = [f.to_json() for f in self.findings]
        if self.noise_margin is not None:
            doc["noise_margin"] = self.noise_margin
        if self.clock_check is not None:
            doc["clock_check"] = self.clock_check.to_json()
        if self.resumed:
            doc["resumed"] = True
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> ScoreResult:
        trials, clock = doc.get("trials"), doc.get("clock_check")
        return cls(doc["run_id"], doc.get("task"), None if doc.get("status") is None else Status(doc["status"]),
                   doc.get("correct", False), doc.get("speedup"), doc.get("speedup_ci95"), doc.get("reference_ms"),
                   doc.get("candidate_ms"), None if trials is None else [TrialCheck.from_json(t) for t in trials],
                   [Finding.from_json(f) for f in doc.get("findings", [])], doc.get("noise_margin"),
                   None if clock is None else ClockSummary(**clock), doc.get("resumed", False))


@dataclass(frozen=True)
class RunRecord:
    """One scoring run as the store summarises it (`Store.latest_runs`): what the leaderboard aggregates and
    the report joins with the screen. `status` is None for a candidate that was never scored (the screen
    rejected it: `pkb leaderboard` counts it as a failure)."""
    task: str
    candidate: str
    label: str
    nproc: int | None = None
    backend: str | None = None
    status: Status | None = None
    correct: bool = False
    speedup: float | None = None
    started: float | None = None
    finished: float | None = None
    ci_lo: float | None = None           # the speed-up's 95% interval
    ci_hi: float | None = None
    noise_margin: float | None = None    # the score's resolution: below it, no difference is trusted

    @property
    def resolved(self) -> bool | None:
        """Whether the clock told this candidate from the reference (timing.resolved)."""
        return resolved([self.ci_lo, self.ci_hi], self.noise_margin) if self.speedup else None

    @property
    def untimed(self) -> bool:
        """Correct, but scored without timing (correctness-only)."""
        return self.correct and not self.speedup

    @property
    def gpu_seconds(self) -> float | None:
        """Wall time of the run times its ranks (at least one); None where a time is missing."""
        if not (self.started and self.finished):
            return None
        return (self.finished - self.started) * max(1, self.nproc or 0)

    def to_json(self) -> dict:
        """The store's columns, as the store keeps them (correct as 0 or 1)."""
        return {"task": self.task, "candidate": self.candidate, "label": self.label, "nproc": self.nproc,
                "backend": self.backend, "status": None if self.status is None else self.status.value,
                "correct": int(self.correct), "speedup": self.speedup, "started": self.started,
                "finished": self.finished, "ci_lo": self.ci_lo, "ci_hi": self.ci_hi,
                "noise_margin": self.noise_margin}

    @classmethod
    def from_json(cls, doc: dict) -> RunRecord:
        status = doc.get("status")
        return cls(doc["task"], doc["candidate"], doc["label"], doc.get("nproc"), doc.get("backend"),
                   None if status is None else Status(status), bool(doc.get("correct")), doc.get("speedup"),
                   doc.get("started"), doc.get("finished"), doc.get("ci_lo"), doc.get("ci_hi"),
                   doc.get("noise_margin"))
