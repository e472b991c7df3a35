"""What a screen concludes, as dataclasses: `ScreenResult` and its parts. JSON (the schema of `pkb screen
--json`, the store's rows, the pool workers' answers) only where a result crosses a process or a file:
`to_json` and `from_json` are that boundary, and `from_json(r.to_json())` gives `r` back."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum

from pkbsim.world.findings import Finding


class Semantics(StrEnum):
    """Whose rules decide a verdict (docs/screening.md). pkb's: its GPU scorer's protocol, fresh inputs on every
    call, calls back to back with every output checked, no output aliasing an input, no input changed.
    ParallelKernelBench's: that harness as it runs, each correctness trial a fresh process with one call, the
    timing loop back to back on identical inputs with no output checked, no aliasing or mutation check. A fault
    only pkb's rules see (`Reason.pkb_only`) rejects under pkb's and is a warning under the other's."""
    PKB = "pkb"
    PARALLELKERNELBENCH = "parallelkernelbench"


class Stage(StrEnum):
    """The pipeline's stages, in their order: where a screen that ran to its verdict ended (`ScreenResult.stage`,
    the last that ran) and what it passed (`ScreenResult.checked`)."""
    STATIC = "static"
    FUNCTIONAL = "functional"
    SIZES = "sizes"   # the candidate at larger sizes, up to the full size, within a budget (sizes.py)
    COST = "cost"


class EndedBy(StrEnum):
    """What ended a screen outside the pipeline's stages, in `ScreenResult.stage` where a stage would be: the
    sandbox, where the candidate broke a cap of its screening process (or it outlived its bound); for a screen
    pkb could not finish, the limit that ended it (the kind of its reason). Apart from `Stage`, so that a
    stage is always one the pipeline has; the values are the strings stored rows and `--json` carry."""
    SANDBOX = "sandbox"
    TIME_LIMIT = "time_limit"
    MEMORY_LIMIT = "memory_limit"
    WORKER_CRASH = "worker_crash"
    PKB_ERROR = "pkb_error"


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


class ReasonKind(StrEnum):
    """Why a screen did not pass. A reject that a fatal protocol finding decides (deadlock, mismatch, race,
    ...) carries the finding's own kind instead (pkbsim/world/findings.py)."""
    # reject: the candidate's fault
    UNREADABLE = "unreadable"
    COMPILE_ERROR = "compile_error"
    IMPORT_ERROR = "import_error"
    SIGNATURE = "signature"
    TAMPERING = "tampering"
    ERROR = "error"                    # its own code raised
    TIMEOUT = "timeout"                # its own code loops outside any simulated wait
    CRASH = "crash"                    # its process exited mid-call
    WRONG_OUTPUT = "wrong_output"
    WRONG_AT_SIZE = "wrong_output_at_size"  # right at the screen's size, wrong at a larger one (sizes.py)
    NUMERICS = "numerics"                  # a few elements beyond the tolerance at a larger size (sizes.py)
    ALIASED_OUTPUT = "aliased_output"
    MODIFIED_INPUT = "modified_input"
    SLOWER = "slower"
    RESOURCE_LIMIT = "resource_limit"  # it broke a sandbox cap
    # inconclusive: a limit of pkb
    NOT_SIMULATED = "not_simulated"
    LIMIT = "limit"
    TIME_LIMIT = "time_limit"
    MEMORY_LIMIT = "memory_limit"
    WORKER_CRASH = "worker_crash"
    REFERENCE = "reference"
    PKB_ERROR = "pkb_error"


@dataclass
class Reason:
    kind: str       # a ReasonKind, or a fatal finding's kind
    message: str
    site: str = ""  # file:line where known
    pkb_only: bool = False  # a fault under pkb's rules only (Semantics): ParallelKernelBench's harness cannot see it

    def __post_init__(self):
        self.kind = ReasonKind(self.kind) if self.kind in ReasonKind._value2member_map_ else str(self.kind)

    def to_json(self) -> dict:
        return {"kind": str(self.kind), "message": self.message, "site": self.site, "pkb_only": self.pkb_only}

    @classmethod
    def from_json(cls, d: dict) -> Reason:
        return cls(**d)


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
    stage: Stage | EndedBy = Stage.STATIC  # the last stage that ran, or what ended the screen outside them
    reasons: list[Reason] = field(default_factory=list)
    correct: bool | None = None      # None: outputs were not compared (not simulated, or rejected earlier)
    findings: list[Finding] = field(default_factory=list)
    predicted: Prediction | None = None
    timeline: str | None = None
    checked: list[Stage] = field(default_factory=list)  # the stages passed
    not_simulated: list[str] = field(default_factory=list)
    compile: dict | None = None      # nvcc report for inline CUDA sources (resources per kernel)
    seconds: dict = field(default_factory=dict)  # wall time per stage (and "build", "shape": parts of one)
    semantics: Semantics = Semantics.PKB  # whose rules `verdict` and `reasons` are under
    verdicts: dict = field(default_factory=dict)  # Semantics -> the Verdict under it ({}: a row of an older pkb)
    warnings: list[Reason] = field(default_factory=list)  # faults the rules in force do not count (pkb_only)
    notes: list[str] = field(default_factory=list)  # what a stage left unchecked and why (a limit of pkb, no verdict)

    def __post_init__(self):
        self.stage = _stage(self.stage)
        self.checked = [_stage(s) for s in self.checked]
        self.semantics = Semantics(self.semantics)
        self.verdicts = {Semantics(k): Verdict(v) for k, v in self.verdicts.items()}

    def settle(self) -> ScreenResult:
        """The verdict under each rule set, from the pipeline's: the pipeline decides under ParallelKernelBench's
        rules and keeps the faults only pkb's count in `warnings`; here they join `reasons`, under pkb's rules."""
        bench = self.verdict
        self.verdicts = {Semantics.PARALLELKERNELBENCH: bench,
                         Semantics.PKB: Verdict.REJECT if self.warnings else bench}
        self.reasons, self.warnings = self.warnings + self.reasons, []
        self.verdict, self.semantics = self.verdicts[Semantics.PKB], Semantics.PKB
        return self

    def under(self, semantics: Semantics | str) -> ScreenResult:
        """This result as the given rules decide it (a copy). Under ParallelKernelBench's, faults only pkb's
        rules count become warnings; under pkb's they are reasons, first. A row of an older pkb, which
        decided under pkb's rules alone, is returned as it is."""
        semantics = Semantics(semantics)
        if not self.verdicts:
            return self
        every = self.reasons + self.warnings
        own, shared = [r for r in every if r.pkb_only], [r for r in every if not r.pkb_only]
        if semantics is Semantics.PKB:
            return replace(self, verdict=self.verdicts[semantics], reasons=own + shared, warnings=[],
                           semantics=semantics)
        return replace(self, verdict=self.verdicts[semantics], reasons=shared, warnings=own, semantics=semantics)

    def reject(self, stage: Stage | EndedBy, reasons: list[Reason]) -> ScreenResult:
        self.verdict, self.stage = Verdict.REJECT, _stage(stage)
        self.reasons.extend(reasons)
        return self

    def inconclusive(self, stage: Stage | EndedBy, reason: Reason) -> ScreenResult:
        self.verdict, self.stage = Verdict.INCONCLUSIVE, _stage(stage)
        self.reasons.append(reason)
        return self

    def to_json(self) -> dict:
        return dict(asdict(self), verdict=self.verdict.value, stage=str(self.stage), reasons=[r.to_json() for r in self.reasons],
                    checked=[str(s) for s in self.checked], seconds={str(k): v for k, v in self.seconds.items()},
                    semantics=str(self.semantics), verdicts={str(k): str(v) for k, v in self.verdicts.items()},
                    warnings=[r.to_json() for r in self.warnings])

    @classmethod
    def from_json(cls, d: dict) -> ScreenResult:
        """Keys this version does not know (a store written by another) are left out."""
        p = d.get("predicted")
        known = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in known},
                      "verdict": Verdict(d["verdict"]), "reasons": [Reason.from_json(r) for r in d.get("reasons", [])],
                      "warnings": [Reason.from_json(r) for r in d.get("warnings", [])],
                      "findings": [Finding(**f) for f in d.get("findings", [])],
                      "predicted": Prediction(**p) if p else None})


def _stage(name: str) -> Stage | EndedBy | str:
    """A stage's name (or what ended a screen) as its enum; one this version does not know (a store written by
    another) stays a string."""
    for kind in (Stage, EndedBy):
        if name in kind._value2member_map_:
            return kind(name)
    return str(name)
