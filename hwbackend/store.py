"""Results in SQLite: one row per scoring run and one per checked trial, written as they complete."""
from __future__ import annotations

import json
import sqlite3
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, task TEXT, candidate TEXT, candidate_sha TEXT, label TEXT, nproc INTEGER,
  backend TEXT, status TEXT, correct INTEGER, speedup REAL, ci_lo REAL, ci_hi REAL, reference_ms REAL,
  candidate_ms REAL, findings TEXT, started REAL, finished REAL);
CREATE TABLE IF NOT EXISTS trials (
  run_id TEXT, phase TEXT, idx INTEGER, rank INTEGER, ok INTEGER, message TEXT);
"""


class Store:
    def __init__(self, path: str):
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA)

    def start(self, run_id: str, task: str, candidate: str, sha: str, label: str, nproc: int, backend: str) -> None:
        self.db.execute("INSERT INTO runs (run_id, task, candidate, candidate_sha, label, nproc, backend, status, "
                        "started) VALUES (?,?,?,?,?,?,?,?,?)",
                        (run_id, task, candidate, sha, label, nproc, backend, "running", time.time()))
        self.db.commit()

    def trial(self, run_id: str, phase: str, idx: int, rank: int, ok: bool, message: str) -> None:
        self.db.execute("INSERT INTO trials VALUES (?,?,?,?,?,?)", (run_id, phase, idx, rank, int(ok), message))
        self.db.commit()

    def finish(self, run_id: str, result: dict) -> None:
        ci = result.get("speedup_ci95") or [None, None]
        self.db.execute("UPDATE runs SET status=?, correct=?, speedup=?, ci_lo=?, ci_hi=?, reference_ms=?, "
                        "candidate_ms=?, findings=?, finished=? WHERE run_id=?",
                        (result["status"], int(result["correct"]), result.get("speedup"), ci[0], ci[1],
                         result.get("reference_ms"), result.get("candidate_ms"), json.dumps(result["findings"]),
                         time.time(), run_id))
        self.db.commit()

    def completed(self, task: str, sha: str, nproc: int, backend: str, timed: bool = True) -> dict | None:
        """The latest finished result for this file, task and size (with timed=True, not a correctness-only one)."""
        skip = ("running", "correct") if timed else ("running",)
        row = self.db.execute("SELECT run_id, status, correct, speedup, ci_lo, ci_hi, reference_ms, candidate_ms, "
                              "findings FROM runs WHERE task=? AND candidate_sha=? AND nproc=? AND backend=? AND "
                              f"status NOT IN ({','.join('?' * len(skip))}) ORDER BY finished DESC LIMIT 1",
                              (task, sha, nproc, backend, *skip)).fetchone()
        if row is None:
            return None
        return {"run_id": row[0], "status": row[1], "correct": bool(row[2]), "speedup": row[3],
                "speedup_ci95": [row[4], row[5]], "reference_ms": row[6], "candidate_ms": row[7],
                "findings": json.loads(row[8] or "[]"), "resumed": True}

    def latest_runs(self) -> list[dict]:
        cols = ["task", "candidate", "label", "nproc", "backend", "status", "correct", "speedup", "started", "finished"]
        rows = self.db.execute(f"SELECT {', '.join(cols)} FROM runs r WHERE status != 'running' AND finished = "
                               "(SELECT MAX(finished) FROM runs s WHERE s.task = r.task AND s.candidate = r.candidate "
                               "AND s.nproc = r.nproc AND s.backend = r.backend)").fetchall()
        return [dict(zip(cols, row)) for row in rows]
