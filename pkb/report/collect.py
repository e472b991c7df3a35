"""The report's data: screen rows joined with hardware scores, and how well the screen predicted them."""
from __future__ import annotations

import math
import os
import statistics
from dataclasses import asdict, dataclass, field

from hwbackend import RunRecord
from pkb.store import ScoreStore, ScreenStore, timeline_name, timelines_dir, trajectories
from pkbsim import ScreenResult, Semantics, Verdict


@dataclass
class Row:
    """One candidate: its screen, and its latest hardware score (None: not scored)."""
    screen: ScreenResult
    score: RunRecord | None = None
    timeline: str | None = None   # the file the report reads for its timeline (timeline_path), if the screen wrote one

    def to_json(self) -> dict:
        return dict(self.screen.to_json(), score=None if self.score is None else self.score.to_json())


@dataclass
class Report:
    rows: list[Row]                                    # per candidate
    confusion: dict = field(default_factory=dict)      # screen verdict -> hardware status -> count
    pairs: list = field(default_factory=list)          # (predicted, measured, label) where both exist
    spearman: float | None = None
    gpu_hours_saved: float | None = None
    notes: list[str] = field(default_factory=list)
    trajectories: list[dict] = field(default_factory=list)  # `pkb refine` runs: per run and task, its steps

    def to_json(self) -> dict:
        return {"rows": [r.to_json() for r in self.rows], "confusion": self.confusion, "pairs": self.pairs,
                "spearman": self.spearman,
                "gpu_hours_saved": self.gpu_hours_saved, "notes": self.notes, "trajectories": self.trajectories}


def collect(db: str) -> Report:
    screens = {}
    for r in ScreenStore(db).all():  # later rows replace earlier ones of the same file and task
        screens[(r.task, r.candidate)] = r
    scores = {(s.task, s.candidate): s for s in ScoreStore(db).latest_runs()}
    rows = [Row(r, scores.get(key), timeline_path(db, r)) for key, r in screens.items()]
    rep = Report(rows, trajectories=trajectories(db))
    for row in rows:
        r = row.screen
        if row.score:
            hw, verdict = row.score.status.value, r.verdict.value
            rep.confusion.setdefault(verdict, {}).setdefault(hw, 0)
            rep.confusion[verdict][hw] += 1
            pred, meas = r.predicted.speedup if r.predicted else None, row.score.speedup
            if pred is not None and meas is not None:
                rep.pairs.append((pred, meas, f"{r.task}/{os.path.basename(r.candidate)}"))
    if len(rep.pairs) >= 3:
        from scipy.stats import spearmanr  # 2.5-3.8 s here: only with three scored pairs or more
        rho = spearmanr([p[0] for p in rep.pairs], [p[1] for p in rep.pairs]).statistic
        rep.spearman = None if math.isnan(rho) else float(rho)
    durations = [s.gpu_seconds for s in scores.values() if s.gpu_seconds is not None]
    rejected_unscored = sum(r.screen.verdict is Verdict.REJECT and not r.score for r in rows)
    if durations:
        rep.gpu_hours_saved = rejected_unscored * statistics.median(durations) / 3600
        rep.notes.append(f"GPU hours saved: {rejected_unscored} rejected candidates never scored x the median "
                         f"scoring job ({statistics.median(durations):.0f} GPU-seconds)")
    else:
        rep.notes.append("no hardware scores in this store: run `pkb run --score` or `pkb score` to measure "
                         "screening quality")
    return rep


def timeline_path(db: str, r: ScreenResult) -> str | None:
    """Where the batch wrote this row's timeline (pkb/batch names it from the store's place, the task and
    the candidate), or None where the screen recorded none. Never the path the result itself names: a
    result comes from the candidate's side, and the report must not read a file a candidate chose."""
    if not r.timeline or not r.task or not r.candidate:
        return None
    return os.path.join(timelines_dir(db), timeline_name(r.task, r.candidate))


@dataclass
class ScreenCounts:
    """Per candidate group, what the screen decided before the GPU (`pkb leaderboard`'s last columns)."""
    screen_rejected: int = 0    # rejected by the screen, never scored: counted as failures
    sent_inconclusive: int = 0  # inconclusive, sent to the GPU like a pass

    def to_json(self) -> dict:
        return asdict(self)


def with_screen_verdicts(runs: list[RunRecord], screens: list[ScreenResult], semantics: Semantics = Semantics.PKB
                         ) -> tuple[list[RunRecord], dict[str, ScreenCounts]]:
    """The scored runs plus one failed, unscored run (status None) per candidate the screen rejected under
    `semantics`' rules (and nobody scored), and per label the count of screen rejects and of inconclusive
    candidates sent to the GPU. The GPU's statuses are its scorer's, which follows pkb's rules."""
    scored = {(r.task, os.path.abspath(r.candidate)) for r in runs}
    extra, counts = [], {}
    for s in (s.under(semantics) for s in screens):
        label = os.path.basename(os.path.dirname(os.path.abspath(s.candidate)))
        c = counts.setdefault(label, ScreenCounts())
        if s.verdict is Verdict.REJECT and (s.task, os.path.abspath(s.candidate)) not in scored:
            c.screen_rejected += 1
            extra.append(RunRecord(s.task, s.candidate, label))
        elif s.verdict is Verdict.INCONCLUSIVE:
            c.sent_inconclusive += 1
    return runs + extra, counts
