"""Findings and verdicts: what a run of the simulated world concludes, and the exit code for it."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

# verdict -> exit code of `pkb check` (documented in docs/check.md)
EXIT_CODES = {"ok": 0, "deadlock": 3, "mismatch": 3, "protocol": 3, "error": 4, "timeout": 5, "inconclusive": 6,
              "nothing_checked": 7, "exited": 8}

# finding kind -> the verdict it implies (kinds not listed here are warnings)
_VERDICT_OF_KIND = {
    "deadlock": "deadlock",
    "buffering_hazard": "deadlock",
    "order_hazard": "deadlock",
    "mismatch": "mismatch",
    "p2p_mismatch": "mismatch",
    "group_mismatch": "mismatch",
    "protocol": "protocol",
    "race": "protocol",
    "co_residency": "protocol",  # a kernel's program waits for a later program of the same launch
    "error": "error",
    "timeout": "timeout",
    "not_simulated": "inconclusive",        # a limit of pkb, named: never the program's fault
    "no_communication": "nothing_checked",  # the run ended without one simulated collective, p2p or symm op
    "process_exit": "exited",  # a rank ended its process (os._exit) with a non-zero status or while it was needed
}


@dataclass
class Finding:
    kind: str
    message: str
    ranks: list[int] = field(default_factory=list)
    sites: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)  # a race's accesses: the harness calls they were in (if known)

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def between_calls(self) -> bool:
        """A race of one harness call's access with another's (no exit barrier: a rank's next call reuses a
        buffer a peer still reads in the previous one), not within one call."""
        return self.kind == "race" and len(set(self.calls)) > 1

    def render(self) -> str:
        head = f"{self.kind.upper().replace('_', ' ')}: {self.message}"
        return "\n".join([head, *("  " + d for d in self.details)])


def is_fatal(finding: Finding) -> bool:
    """Whether the finding decides the verdict (the rest are warnings)."""
    return finding.kind in _VERDICT_OF_KIND


# the root cause first: a mismatch or protocol error usually ends in a deadlock or an error
# (a rank's os._exit explains the deadlock or timeout of the peers it left waiting)
_ROOT_CAUSE_ORDER = ("mismatch", "protocol", "inconclusive", "exited", "deadlock", "error", "timeout",
                     "nothing_checked")


def verdict_of(findings: list[Finding]) -> str:
    """The verdict of a run: the most specific fatal finding wins; no fatal finding means ok."""
    verdicts = {_VERDICT_OF_KIND[f.kind] for f in findings if f.kind in _VERDICT_OF_KIND}
    if not verdicts:
        return "ok"
    return next(v for v in _ROOT_CAUSE_ORDER if v in verdicts)


def explains(finding: Finding, findings: list[Finding]) -> bool:
    """Whether `finding` is a more specific cause than every fatal one in `findings` (a race found after
    the stale data it let through already failed a rank's own check)."""
    v, current = _VERDICT_OF_KIND.get(finding.kind), verdict_of(findings)
    if v is None or current == "ok":
        return v is not None
    return _ROOT_CAUSE_ORDER.index(v) < _ROOT_CAUSE_ORDER.index(current)
