"""What a screen concludes, as one JSON-able object (the schema of `pkb screen --json`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum

STAGES = ("static", "functional", "cost")


class Verdict(StrEnum):
    """pass; reject: the candidate's own fault, with a site in its file; inconclusive: a limit of pkb (named
    in one line), so the candidate goes on to GPU scoring like a pass."""
    PASS = "pass"
    REJECT = "reject"
    INCONCLUSIVE = "inconclusive"

    @property
    def exit_code(self) -> int:
        """`pkb screen`'s exit code for this verdict (2 is bad usage)."""
        return {Verdict.PASS: 0, Verdict.REJECT: 1, Verdict.INCONCLUSIVE: 3}[self]

    @property
    def goes_to_hardware(self) -> bool:
        return self is not Verdict.REJECT


@dataclass
class Reason:
    kind: str       # reject: compile_error, signature, tampering, deadlock, mismatch, error, wrong_output,
                    # aliased_output, modified_input, slower, ...
                    # inconclusive: not_simulated, limit, time_limit, memory_limit, worker_crash, reference, pkb_error
    message: str
    site: str = ""  # file:line where known


@dataclass
class Prediction:
    reference_us: float
    candidate_us: float
    speedup: float
    bottleneck: str         # link-bound, compute-bound, latency/launch-bound, serialised waits
    uncertain: bool
    notes: list[str] = field(default_factory=list)
    shares: dict = field(default_factory=dict)          # fraction of the candidate's critical path per class
    critical_path: list = field(default_factory=list)   # the candidate's last critical-path kernels


@dataclass
class ScreenResult:
    task: str
    candidate: str
    world_size: int
    topology: str
    seed: int
    verdict: Verdict = Verdict.PASS
    stage: str = "static"            # the last stage that ran
    reasons: list[Reason] = field(default_factory=list)
    correct: bool | None = None      # None: outputs were not compared (not simulated, or rejected earlier)
    findings: list[dict] = field(default_factory=list)
    predicted: Prediction | None = None
    timeline: str | None = None
    checked: list[str] = field(default_factory=list)
    not_simulated: list[str] = field(default_factory=list)
    compile: dict | None = None      # nvcc report for inline CUDA sources (resources per kernel)
    seconds: dict = field(default_factory=dict)  # wall time per stage

    def reject(self, stage: str, reasons: list[Reason]) -> ScreenResult:
        self.verdict, self.stage = Verdict.REJECT, stage
        self.reasons.extend(reasons)
        return self

    def inconclusive(self, stage: str, reason: Reason) -> ScreenResult:
        self.verdict, self.stage = Verdict.INCONCLUSIVE, stage
        self.reasons.append(reason)
        return self

    def to_json(self) -> dict:
        return dict(asdict(self), verdict=self.verdict.value)
