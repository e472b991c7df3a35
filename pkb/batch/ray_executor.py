"""`pkb run --executor ray`: the same jobs fanned out over a Ray cluster (RAY_ADDRESS, or a local instance).

Each screen is one Ray task, whose body (`screen_one`) runs the job in a screening worker of its own inside
the candidate sandbox on whatever node runs it: the same worker, sandbox and caps as `pkb run`'s local pool
(a Ray worker process is long-lived and shared, so the candidate must never run in it). A node without
bwrap answers inconclusive, naming the fix; PKB_NO_SANDBOX=1 in the driver's environment runs the screen
in the Ray worker itself. A task over the time limit is cancelled with force (its worker process is
killed) and recorded as inconclusive, like the local pool. Ray is an optional extra: `pip install 'pkb[ray]'`.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable

import candidate_sandbox
from pkb.batch.job import ScreenJob
from pkb.batch.pool import run_local
from pkb.batch.worker import inconclusive, limit_memory, screen_job
from pkbsim import ReasonKind, ScreenResult

FORWARDED = (candidate_sandbox.DISABLE, candidate_sandbox.MAX_TASKS, candidate_sandbox.CPU_SECONDS)


class RayUnavailable(Exception):
    """Ray is not installed here; the message names the fix (the command line reports it as bad usage)."""


def run_ray(jobs: list[ScreenJob], time_limit: float, memory_gb: float,
            on_result: Callable[[ScreenResult], None]) -> None:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--executor ray needs Ray: pip install 'pkb[ray]' (or use --executor local)") from None
    started_here = not ray.is_initialized()
    if started_here:
        path = os.pathsep.join(p for p in (_root(), os.environ.get("PYTHONPATH")) if p)
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path} | {k: os.environ[k] for k in FORWARDED
                                                                  if k in os.environ}})

    @ray.remote(max_retries=0, memory=_memory_request(ray, memory_gb))
    def screen_remote(job: dict) -> dict:  # JSON across Ray's process boundary
        return screen_one(ScreenJob.from_json(job), time_limit, memory_gb).to_json()

    try:
        _collect(ray, {screen_remote.remote(j.to_json()): (j, time.monotonic() + time_limit) for j in jobs}, time_limit,
                 on_result)
    finally:
        if started_here:  # a local instance's processes must not outlive the batch
            ray.shutdown()


def _memory_request(ray, memory_gb: float) -> int | None:
    """Ray's scheduling reservation for one screen: --memory-gb, but no more than the largest node offers.
    Ray sizes a node's memory from what is free when it starts; a request above every node's is infeasible
    and waits for the time limit (the 12 GB default did on a 24 GiB machine with 16 GiB free). The worker
    still holds the candidate to --memory-gb (its address-space limit)."""
    if memory_gb <= 0:
        return None
    largest = max((n["Resources"].get("memory", 0) for n in ray.nodes() if n.get("Alive")), default=0)
    want = int(memory_gb * 2**30)
    return min(want, int(largest)) if largest > 0 else want


def screen_one(job: ScreenJob, time_limit: float, memory_gb: float) -> ScreenResult:
    """A Ray task's body: the job in a sandboxed screening worker of its own (pool.run_local with one
    worker), or, with the sandbox disabled, here."""
    if not candidate_sandbox.wanted():
        limit_memory(memory_gb)
        return screen_job(job)
    try:
        candidate_sandbox.check()
    except candidate_sandbox.SandboxUnavailable as e:
        return inconclusive(job, ReasonKind.PKB_ERROR, f"this Ray node cannot sandbox the candidate: {e}")
    results: list[ScreenResult] = []
    run_local([job], 1, time_limit, memory_gb, results.append, sandboxed=True)
    return results[0]


def _collect(ray, pending: dict, time_limit: float, on_result: Callable[[ScreenResult], None]) -> None:
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
        for ref in ready:
            job, _ = pending.pop(ref)
            try:
                on_result(ScreenResult.from_json(ray.get(ref)))
            except Exception as e:  # noqa: BLE001 - a worker that died is a result, not a crash of the batch
                on_result(inconclusive(job, ReasonKind.WORKER_CRASH, f"the Ray worker failed: {type(e).__name__}: {e}"))
        now = time.monotonic()
        for ref, (job, deadline) in list(pending.items()):
            if now > deadline:
                ray.cancel(ref, force=True)
                pending.pop(ref)
                on_result(inconclusive(job, ReasonKind.TIME_LIMIT, f"the screen took longer than --time-limit "
                                                                      f"{time_limit:g} s"))


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
