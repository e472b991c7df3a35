"""One candidate file screened for the loop, through the batch's machinery (pkb/batch: a sandboxed worker
process, the screen store, a stored result reused for the same content), at most `workers` at once over
every task of a run."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from pkb import batch
from pkb.batch.job import ScreenJob
from pkb.refine.redact import redact_json
from pkbsim import MARGIN, MEMORY_GB, RUN_TIMEOUT_S, TIME_LIMIT_S, ScreenResult
from tasks.parallelkernelbench.naming import DEFAULT_DTYPE, Checkout


@dataclass(frozen=True)
class ScreenSpec:
    """How every candidate of one task is screened (the same seed for every step, so steps compare)."""
    task: str
    world_size: int
    topology: str
    seed: int
    margin: float = MARGIN
    timeout: float = RUN_TIMEOUT_S
    cost: bool = True
    parallelkernelbench_root: str | None = None
    parallelkernelbench_dtype: str = DEFAULT_DTYPE

    @property
    def checkout(self) -> Checkout | None:
        """The checkout its task comes from (the two fields stay apart: runs are stored with them)."""
        root = self.parallelkernelbench_root
        return Checkout(root, self.parallelkernelbench_dtype) if root else None


@dataclass
class Screener:
    db: str
    workers: int = 1
    time_limit: float = TIME_LIMIT_S
    memory_gb: float = MEMORY_GB
    sandboxed: bool = True
    _slots: threading.BoundedSemaphore = field(init=False, repr=False)
    _store_lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self):
        self._slots = threading.BoundedSemaphore(max(1, self.workers))

    def screen(self, spec: ScreenSpec, path: str) -> ScreenResult:
        path = os.path.abspath(path)
        job = ScreenJob(spec.task, path, spec.world_size, spec.topology, spec.seed, spec.margin, spec.timeout,
                        os.path.join(batch.timelines_dir(self.db), batch.timeline_name(spec.task, path)),
                        spec.checkout, cost=spec.cost)
        with self._store_lock:
            store = batch.open_store(self.db)
            results, todo = batch.resume([job], store, fresh=False)
        if todo:
            with self._slots:
                store = _Redacting(batch.open_store(self.db))  # a connection per thread (sqlite3)
                batch.screen(todo, store, results, executor="local", workers=1, time_limit=self.time_limit,
                             memory_gb=self.memory_gb, sandboxed=lambda: self.sandboxed, on_result=lambda r: None)
        return _redacted(results[(spec.task, path)])


def _redacted(res: ScreenResult) -> ScreenResult:
    """The result with no secret value in it (redact.py): what a candidate printed or raised may hold one."""
    return ScreenResult.from_json(redact_json(res.to_json()))


class _Redacting:
    """The screen store, storing each result redacted."""

    def __init__(self, store):
        self.store = store

    def put(self, sha, res: ScreenResult) -> None:
        self.store.put(sha, _redacted(res))

    def __getattr__(self, name):
        return getattr(self.store, name)

