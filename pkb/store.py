"""The results file (SQLite: --db, pkb_results.sqlite unless PKB_DB says otherwise): every table in it, the
candidate hash that keys them (candidate_sha), and the folders beside it. The one module that opens the file.

Tables: `screens`, one row per candidate as it finishes (ScreenStore: `pkb run`, `pkb refine`'s screens),
keyed by what determines the result (task, candidate content hash, world size, topology), so a batch that
stops half-way resumes where it stopped and a changed file is screened again; `runs` and `trials`
(ScoreStore): one row per scoring run and one per checked call, written as they complete, a run keyed by the
same hash; `refine_runs` and `refine_steps` (RefineStore): every attempt of `pkb refine` with the prompt sent,
the reply, the file and its hash, the verdict, the feedback, tokens and times, from which a run resumes (no
API key is ever written: a run stores the endpoint's URL and the model's name).

The scorer (hwbackend) writes its tables through a ScoreStore the shell hands it (`ScoreOptions.store`, the
shape hwbackend/recorder.py names): a library never imports the shell (tests/test_layering.py), and this way
it neither opens the file nor hashes a candidate itself, so the file has one owner and one hash.

Beside the file: the batch's simulated timelines (TIMELINES) and the refinement steps' files (STEPS_DIR).
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

from hwbackend import RUNNING, Finding, RunRecord, ScoreResult, Status
from pkb.refine.redact import redact, redact_json, secrets

if TYPE_CHECKING:
    from pkbsim import ScreenResult

TIMELINES = "pkb_timelines"  # beside the results file: <task>.<file>.<path hash>.json (timeline_name)
STEPS_DIR = "pkb_refine"     # beside the results file: <run>/<task>/cand_<sha256[:12]>.py

SCREENS = """
CREATE TABLE IF NOT EXISTS screens (
  task TEXT, candidate TEXT, candidate_sha TEXT, world_size INTEGER, topology TEXT, verdict TEXT, stage TEXT,
  speedup REAL, result TEXT, finished REAL,
  PRIMARY KEY (task, candidate_sha, world_size, topology));
"""


def candidate_sha(content: bytes) -> str:
    """The candidate hash: a file's content key in every table of the file (sha256, hex)."""
    return hashlib.sha256(content).hexdigest()


def file_sha(path: str) -> str:
    with open(path, "rb") as f:
        return candidate_sha(f.read())


def _connect(path: str, schema: str, **kw) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, **kw)
    db.executescript(schema)
    return db


class ScreenStore:
    """The screens table. Its rows become ScreenResults where they are read, not at the module's top: `pkb score`
    uses this module's ScoreStore and loads no part of the simulator (tests/test_front_doors.py)."""

    def __init__(self, path: str):
        self.db = _connect(path, SCREENS)

    def get(self, task: str, sha: str, world_size: int, topology: str) -> ScreenResult | None:
        from pkbsim import ScreenResult

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
        from pkbsim import ScreenResult

        return [ScreenResult.from_json(json.loads(r[0]))
                for r in self.db.execute("SELECT result FROM screens ORDER BY finished")]


def timelines_dir(db: str) -> str:
    """Where the batch writes its simulated timelines: beside the results file."""
    return os.path.join(os.path.dirname(os.path.abspath(db)), TIMELINES)


def timeline_name(task: str, candidate: str) -> str:
    """The timeline's file name: two candidates with the same file name in different folders get two files."""
    where = hashlib.sha256(os.path.abspath(candidate).encode()).hexdigest()[:8]
    return f"{task}.{os.path.basename(candidate)[:-3]}.{where}.json"


SCORES = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, task TEXT, candidate TEXT, candidate_sha TEXT, label TEXT, nproc INTEGER,
  backend TEXT, status TEXT, correct INTEGER, speedup REAL, ci_lo REAL, ci_hi REAL, reference_ms REAL,
  candidate_ms REAL, findings TEXT, started REAL, finished REAL, noise_margin REAL);
CREATE TABLE IF NOT EXISTS trials (
  run_id TEXT, phase TEXT, idx INTEGER, rank INTEGER, ok INTEGER, message TEXT);
"""


class ScoreStore:
    """The scorer's tables: what `pkb score` and `pkb run --score` hand hwbackend's scorer to record into (the
    Recorder of hwbackend/recorder.py), and what `pkb leaderboard` and `pkb report` read back."""

    def __init__(self, path: str):
        self.db = _connect(path, SCORES)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(runs)")}
        if "noise_margin" not in columns:  # a results file of an older pkb
            self.db.execute("ALTER TABLE runs ADD COLUMN noise_margin REAL")

    def start(self, run_id: str, task: str, candidate: str, label: str, nproc: int, backend: str) -> None:
        self.db.execute("INSERT INTO runs (run_id, task, candidate, candidate_sha, label, nproc, backend, status, "
                        "started) VALUES (?,?,?,?,?,?,?,?,?)",
                        (run_id, task, candidate, file_sha(candidate), label, nproc, backend, RUNNING, time.time()))
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

    def completed(self, task: str, candidate: str, nproc: int, backend: str, timed: bool = True) -> ScoreResult | None:
        """The latest finished result for this file's content, task and size (with timed=True, not a
        correctness-only one). As stored: without the task, the trials and the clock check."""
        skip = (RUNNING, Status.CORRECT.value) if timed else (RUNNING,)
        row = self.db.execute("SELECT run_id, status, correct, speedup, ci_lo, ci_hi, reference_ms, candidate_ms, "
                              "findings, noise_margin FROM runs WHERE task=? AND candidate_sha=? AND nproc=? AND backend=? AND "
                              f"status NOT IN ({','.join('?' * len(skip))}) ORDER BY finished DESC LIMIT 1",
                              (task, file_sha(candidate), nproc, backend, *skip)).fetchone()
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


REFINE = """
CREATE TABLE IF NOT EXISTS refine_runs (run TEXT PRIMARY KEY, created REAL, options TEXT);
CREATE TABLE IF NOT EXISTS refine_steps (
  run TEXT, task TEXT, step INTEGER, prompt TEXT, reply TEXT, code TEXT, file_sha TEXT, candidate TEXT,
  verdict TEXT, stage TEXT, speedup REAL, feedback TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
  request_s REAL, screen_s REAL, started REAL, finished REAL, result TEXT,
  PRIMARY KEY (run, task, step));
"""


@dataclass
class Step:
    run: str
    task: str
    step: int                       # 1-based; step 0 is a file the run started from (no request)
    prompt: str                     # the user message sent for this step (the task's prompt, or feedback)
    reply: str                      # the model's reply ('' for step 0)
    code: str | None                # the candidate file extracted from it (None: malformed reply)
    file_sha: str | None
    candidate: str | None           # where the file was written and screened
    verdict: str                    # pass, reject, inconclusive, or malformed (no screen)
    stage: str                      # the screen's last stage, or what was malformed (no_code, several_files, ...)
    speedup: float | None           # predicted
    feedback: str                   # the message sent back to the model
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    request_s: float = 0.0
    screen_s: float = 0.0           # wall time of the screen (worker start included), 0 for a malformed reply
    started: float = 0.0
    finished: float = 0.0
    result: dict | None = None      # the screen's JSON


class RefineStore:
    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self.db = _connect(path, REFINE, check_same_thread=False)

    def steps_dir(self, run: str, task: str) -> str:
        d = os.path.join(os.path.dirname(os.path.abspath(self.path)), STEPS_DIR, run, task)
        os.makedirs(d, exist_ok=True)
        return d

    def run_options(self, run: str) -> dict | None:
        with self._lock:
            row = self.db.execute("SELECT options FROM refine_runs WHERE run=?", (run,)).fetchone()
        return json.loads(row[0]) if row else None

    def save_run(self, run: str, options: dict) -> None:
        with self._lock:
            self.db.execute("INSERT OR REPLACE INTO refine_runs VALUES (?,?,?)", (run, time.time(), json.dumps(options)))
            self.db.commit()

    def put(self, s: Step) -> None:
        known = secrets()  # no secret is stored (redact.py)
        row = {k: redact(v, known) for k, v in asdict(s).items()}
        row["result"] = json.dumps(redact_json(s.result, known)) if s.result is not None else None
        names = [f.name for f in fields(Step)]
        with self._lock:
            self.db.execute(f"INSERT OR REPLACE INTO refine_steps ({','.join(names)}) VALUES "
                            f"({','.join('?' * len(names))})", [row[n] for n in names])
            self.db.commit()

    def steps(self, run: str, task: str | None = None) -> list[Step]:
        names = [f.name for f in fields(Step)]
        q = f"SELECT {','.join(names)} FROM refine_steps WHERE run=?" + (" AND task=?" if task else "")
        with self._lock:
            rows = self.db.execute(q + " ORDER BY task, step", (run, task) if task else (run,)).fetchall()
        out = []
        for r in rows:
            d = dict(zip(names, r))
            d["result"] = json.loads(d["result"]) if d["result"] else None
            out.append(Step(**d))
        return out

    def runs(self) -> list[tuple[str, dict]]:
        with self._lock:
            rows = self.db.execute("SELECT run, options FROM refine_runs ORDER BY created").fetchall()
        return [(r, json.loads(o)) for r, o in rows]


def trajectories(db: str) -> list[dict]:
    """Per run and task, the steps' verdicts and predicted speed-ups (for `pkb report`); [] where the file
    has no refinement tables."""
    con = sqlite3.connect(db, timeout=30)
    try:
        have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "refine_steps" not in have:
            return []
        rows = con.execute("SELECT run, task, step, verdict, stage, speedup, screen_s, result FROM refine_steps "
                           "ORDER BY run, task, step").fetchall()
    finally:
        con.close()
    out: dict[tuple[str, str], dict] = {}
    for run, task, step, verdict, stage, speedup, screen_s, result in rows:
        t = out.setdefault((run, task), {"run": run, "task": task, "steps": []})
        reasons = (json.loads(result) if result else {}).get("reasons") or []
        why = reasons[0]["kind"] if reasons else (stage if verdict == "malformed" else "")
        t["steps"].append({"step": step, "verdict": verdict, "stage": stage, "why": why, "speedup": speedup,
                           "screen_s": screen_s})
    return list(out.values())
