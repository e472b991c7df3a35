"""The batch's table on a terminal (shared by `pkb run` and `pkb report`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from pkb.batch import summary_row, tally
from pkbsim import ScreenResult

if TYPE_CHECKING:
    from hwbackend import RunRecord, ScoreResult


REASON_CHARS = 90  # a reason longer than this is cut at a word, with an ellipsis (the JSON keeps it whole)


def cut(text: str, limit: int = REASON_CHARS) -> str:
    """`text` within `limit` characters: cut at the last space before it, ending with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head).rstrip(" ,;:") + "…"


def print_table(rows: list[ScreenResult], scores: dict[str, ScoreResult | RunRecord]) -> None:
    """The screen results with their hardware scores, by candidate file."""
    t = Table(title=f"pkb run: {len(rows)} candidates", show_lines=False)
    for col in ("task", "candidate", "verdict", "stage", "predicted", "bottleneck", "measured", "reason"):
        t.add_column(col, overflow="fold")
    for r in rows:
        s = summary_row(r, scores.get(r.candidate))
        pred = "" if s.predicted is None else f"{s.predicted:.2f}x" + ("?" if s.uncertain else "")
        meas = "" if s.measured is None else f"{s.measured_text} ({s.hw_status})"
        t.add_row(s.task, s.candidate, s.verdict.value, str(s.stage), pred, s.bottleneck, meas, cut(s.reason))
    Console().print(t)   # the terminal's width: rich folds what does not fit
    print(f"{tally(rows)}; '?' marks an uncertain prediction, '~' a measured speed-up within its noise margin")
