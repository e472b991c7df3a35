"""Screens many candidates in parallel worker processes, each candidate under a time and memory limit.

A worker that exceeds the time limit is killed with its whole process group and replaced; its candidate
is inconclusive for `time_limit` (the simulator's own checks report hangs long before: what remains is
slowness). A worker that dies (a crash in native code, the memory limit) is replaced and its candidate
tried once more in the fresh worker, then inconclusive for `worker_crash`: pkb's limits, never the
candidate's fault; a worker the sandbox's supervisor ended for a cap its candidate broke is a reject naming it. Results are handed to `on_result` as they arrive, in completion order.

Each worker runs on a core of its own (round robin over this process's affinity mask when there are more
workers than cores): a world pins its rank threads to the lowest core it may use (launcher.py, cheaper GIL
hand-offs), so workers that could all use every core pinned all their ranks to the same one and left the
others idle (a 2-core machine screened ParallelKernelBench's references on one core).
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable

import candidate_sandbox as sandbox
from pkb.batch.job import ScreenJob
from pkb.batch.worker import ZYGOTE_GONE_EXIT, inconclusive, rejected
from pkbsim import ReasonKind, ScreenResult, memory_cap

LOG_TAIL = 1 << 16  # bytes of a dead worker's stderr read for the supervisor's line


class _Worker:
    def __init__(self, memory_gb: float, core: int | None = None, sandbox: list[str] = ()):
        cmd = [*sandbox, sys.executable, "-m", "pkb.batch.worker", "--memory-gb", str(memory_gb)]
        self.core = core
        if core is not None:
            cmd += ["--core", str(core)]
        self.log = tempfile.TemporaryFile()  # its stderr: the sandbox's supervisor names a broken cap there
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, start_new_session=True)
        if core is not None:  # at once, while the worker is still starting (it sets it again itself)
            os.sched_setaffinity(self.proc.pid, {core})
        self.job: ScreenJob | None = None
        self.job_id = ""
        self.deadline = 0.0

    def send(self, job: ScreenJob, limit: float) -> None:
        self.job, self.job_id, self.deadline = job, os.urandom(16).hex(), time.monotonic() + limit
        self.log.seek(0)  # the worker is idle: its log starts again (it shares the file's offset), so a
        self.log.truncate()  # batch's logs stay one candidate's output long
        self.proc.stdin.write(json.dumps({"id": self.job_id, "job": job.to_json()}) + "\n")
        self.proc.stdin.flush()

    def answer(self, line: str) -> ScreenResult | None:
        """The result in the worker's answer `line`, filed under the job this pool sent (whatever names the
        line carries); None when the line is not the answer to that job (its id, or not a result at all)."""
        try:
            doc = json.loads(line)
            if doc.get("id") != self.job_id:
                return None
            res = ScreenResult.from_json(doc["result"])
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        job = self.job
        res.task, res.candidate, res.world_size, res.topology, res.seed = (
            job.task, job.candidate, job.world_size, job.topology, job.seed)
        return res

    def breach(self) -> str | None:
        """The supervisor's line, if the sandbox ended this worker for a cap its candidate broke."""
        self.log.seek(max(0, self.log.seek(0, os.SEEK_END) - LOG_TAIL))
        return sandbox.breach(self.log.read().decode(errors="replace"))

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()


def _free_core(taken: list[int | None]) -> int | None:
    """The core of this process's affinity mask that the fewest workers run on (the lowest on a tie)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    return min(cores, key=lambda c: (taken.count(c), c))


def sandbox_prefix(jobs: list[ScreenJob]) -> list[str]:
    """The bwrap command line the workers of these jobs start under: their candidates' folders and the
    ParallelKernelBench checkouts readable, their timeline folders writable."""
    readable = ({os.path.dirname(j.candidate) for j in jobs}
                | {j.checkout.root for j in jobs if j.checkout})
    writable = {os.path.dirname(j.timeline) for j in jobs if j.timeline}
    return sandbox.prefix([sandbox.build_cache(), *sorted(writable)], sorted(readable), candidate_caches=True)


def run_local(jobs: list[ScreenJob], workers: int, time_limit: float, memory_gb: float,
              on_result: Callable[[ScreenResult], None], *, sandboxed: bool) -> None:
    """`sandboxed`: each worker inside bwrap (candidate_sandbox; the caller has checked that it can start)."""
    queue = deque(jobs)
    prefix = sandbox_prefix(jobs) if sandboxed and jobs else []
    retried: set[int] = set()  # ids of jobs whose worker died once
    restarted: set[int] = set()  # ids of jobs whose worker lost its zygote once
    sel = selectors.DefaultSelector()
    pool: list[_Worker] = []

    def start() -> _Worker:
        w = _Worker(memory_gb, _free_core([w.core for w in pool]), prefix)
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        pool.append(w)
        return w

    def retire(w: _Worker) -> None:
        sel.unregister(w.proc.stdout)
        pool.remove(w)
        w.kill()

    try:
        for _ in range(min(workers, len(queue))):
            start().send(queue.popleft(), time_limit)
        while any(w.job for w in pool):
            now = time.monotonic()
            for w in [w for w in pool if w.job and now > w.deadline]:
                late = f"the screen took longer than --time-limit {time_limit:g} s"
                on_result(inconclusive(w.job, ReasonKind.TIME_LIMIT, late))
                retire(w)
                if queue:
                    start().send(queue.popleft(), time_limit)
            wait = max(0.05, min((w.deadline for w in pool if w.job), default=now + 1) - time.monotonic())
            for key, _ in sel.select(timeout=wait):
                w = key.data
                line = w.proc.stdout.readline()
                if not line:  # the worker died (a crash in native code, the memory limit, a sandbox cap)
                    code, broken = w.proc.wait(), w.breach()
                    if code == ZYGOTE_GONE_EXIT and id(w.job) not in restarted:  # not the job's fault: again
                        restarted.add(id(w.job))
                        queue.appendleft(w.job)
                    elif broken and memory_cap(broken):  # the simulation's state counts in it: pkb's limit
                        on_result(inconclusive(w.job, ReasonKind.MEMORY_LIMIT, memory_cap(broken)))
                    elif broken:  # the candidate's doing (a fork bomb, a CPU spinner): no second try
                        on_result(rejected(w.job, ReasonKind.RESOURCE_LIMIT, broken))
                    elif id(w.job) in retried:
                        crashed = f"worker crashed (exit {code}) twice, memory limit {memory_gb:g} GB"
                        on_result(inconclusive(w.job, ReasonKind.WORKER_CRASH, crashed))
                    else:
                        retried.add(id(w.job))
                        queue.appendleft(w.job)
                    retire(w)
                    if queue:
                        start().send(queue.popleft(), time_limit)
                    continue
                res = w.answer(line)  # the worker's answer, across its pipe
                if res is None:
                    why = "the screening worker answered something other than this job's result"
                    on_result(inconclusive(w.job, ReasonKind.PKB_ERROR, why))
                    retire(w)
                    if queue:
                        start().send(queue.popleft(), time_limit)
                    continue
                on_result(res)
                w.job = None
                if queue:
                    w.send(queue.popleft(), time_limit)
    finally:
        while pool:
            retire(pool[-1])
