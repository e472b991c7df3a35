"""Screen results in the scorer's SQLite file (table `screens`), one row per candidate as it finishes.

Rows are keyed by what determines the result (task, candidate content hash, world size, topology), so
a batch that stops half-way resumes where it stopped, and a changed file is screened again.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time

from pkbsim.screen.result import ScreenResult

SCHEMA = """
CREATE TABLE IF NOT EXISTS screens (
  task TEXT, candidate TEXT, candidate_sha TEXT, world_size INTEGER, topology TEXT, verdict TEXT, stage TEXT,
  speedup REAL, result TEXT, finished REAL,
  PRIMARY KEY (task, candidate_sha, world_size, topology));
"""


def file_sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class ScreenStore:
    def __init__(self, path: str):
        self.db = sqlite3.connect(path, timeout=30)
        self.db.executescript(SCHEMA)

    def get(self, task: str, sha: str, world_size: int, topology: str) -> ScreenResult | None:
        row = self.db.execute("SELECT result FROM screens WHERE task=? AND candidate_sha=? AND world_size=? AND "
                              "topology=?", (task, sha, world_size, topology)).fetchone()
        return ScreenResult.from_json(json.loads(row[0])) if row else None

    def put(self, sha: str, result: ScreenResult) -> None:
        r = result
        self.db.execute("INSERT OR REPLACE INTO screens VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (r.task, r.candidate, sha, r.world_size, r.topology, r.verdict.value, str(r.stage),
                         r.predicted.speedup if r.predicted else None, json.dumps(r.to_json()), time.time()))
        self.db.commit()

    def all(self) -> list[ScreenResult]:
        return [ScreenResult.from_json(json.loads(r[0]))
                for r in self.db.execute("SELECT result FROM screens ORDER BY finished")]
