"""Results in SQLite: one row per scoring run and one per checked trial, written as they complete."""
from __future__ import annotations

import json
import sqlite3
import time

from hwbackend.result import RUNNING, Finding, RunRecord, ScoreResult, Status

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, task TEXT, candidate TEXT, candidate_sha TEXT, label TEXT, nproc INTEGER,
  backend TEXT, status TEXT, correct INTEGER, speedup REAL, ci_lo REAL, ci_hi REAL, reference_ms REAL,
  candidate_ms REAL, findings TEXT, started REAL, finished REAL, noise_margin REAL);
CREATE TABLE IF NOT EXISTS trials (
  run_id TEXT, phase TEXT, idx INTEGER, rank INTEGER, ok INTEGER, message TEXT);
"""


class Store:
    def __init__(self, path: str):
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(runs)")}
        if "noise_margin" not in columns:  # a results file of an older pkb
            self.db.execute("ALTER TABLE runs ADD COLUMN noise_margin REAL")

    def start(self, run_id: str, task: str, candidate: str, sha: str, label: str, nproc: int, backend: str) -> None:
        self.db.execute("INSERT INTO runs (run_id, task, candidate, candidate_sha, label, nproc, backend, status, "
                        "started) VALUES (?,?,?,?,?,?,?,?,?)",
                        (run_id, task, candidate, sha, label, nproc, backend, RUNNING, time.time()))
        self.db.commit()

    def trial(self, run_id: str, phase: str, idx: int, rank: int, ok: bool, message: str) -> None:
        self.db.execute("INSERT INTO trials VALUES (?,?,?,?,?,?)", (run_id, phase, idx, rank, int(ok), message))
        self.db.commit()

    def finish(self, result: ScoreResult) -> None:
        ci = result.speedup_ci95 or [None, None]
        status = None if result.status is None else result.status.value
        self.db.execute("UPDATE runs SET status=?, correct=?, speedup=?, ci_lo=?, ci_hi=?, reference_ms=?, "
                        "candidate_ms=?, findings=?, finished=?, noise_margin=? WHERE run_id=?",
                        (status, int(result.correct), result.speedup, ci[0], ci[1], result.reference_ms,
                         result.candidate_ms, json.dumps([f.to_json() for f in result.findings]), time.time(),
                         result.noise_margin, result.run_id))
        self.db.commit()

    def completed(self, task: str, sha: str, nproc: int, backend: str, timed: bool = True) -> ScoreResult | None:
        """The latest finished result for this file, task and size (with timed=True, not a correctness-only
        one). As stored: without the task, the trials and the clock check."""
        skip = (RUNNING, Status.CORRECT.value) if timed else (RUNNING,)
        row = self.db.execute("SELECT run_id, status, correct, speedup, ci_lo, ci_hi, reference_ms, candidate_ms, "
                              "findings, noise_margin FROM runs WHERE task=? AND candidate_sha=? AND nproc=? AND backend=? AND "
                              f"status NOT IN ({','.join('?' * len(skip))}) ORDER BY finished DESC LIMIT 1",
                              (task, sha, nproc, backend, *skip)).fetchone()
        if row is None:
            return None
        return ScoreResult(row[0], None, Status(row[1]), bool(row[2]), row[3],
                           [row[4], row[5]], row[6], row[7], trials=None,
                           findings=[Finding.from_json(f) for f in json.loads(row[8] or "[]")], noise_margin=row[9],
                           resumed=True)

    def latest_runs(self) -> list[RunRecord]:
        """The latest finished run of each (task, candidate, ranks, backend)."""
        cols = ["task", "candidate", "label", "nproc", "backend", "status", "correct", "speedup", "started", "finished",
                "ci_lo", "ci_hi", "noise_margin"]
        rows = self.db.execute(f"SELECT {', '.join(cols)} FROM runs r WHERE status != ? AND finished = "
                               "(SELECT MAX(finished) FROM runs s WHERE s.task = r.task AND s.candidate = r.candidate "
                               "AND s.nproc = r.nproc AND s.backend = r.backend)", (RUNNING,)).fetchall()
        return [RunRecord.from_json(dict(zip(cols, row))) for row in rows]
