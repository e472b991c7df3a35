"""`pkb run --executor ray`: the same jobs fanned out over a Ray cluster (RAY_ADDRESS, or a local instance).

Each screen is one Ray task running the local worker's `screen_job`; a task over the time limit is
cancelled with force (its worker process is killed) and recorded as inconclusive, like the local pool.
Ray is an optional extra: `pip install 'pkb[ray]'`.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable

from pkbsim.screen.worker import inconclusive


class RayUnavailable(Exception):
    """Ray is not installed here; the message names the fix (the command line reports it as bad usage)."""


def run_ray(jobs: list[dict], time_limit: float, memory_gb: float, on_result: Callable[[dict], None]) -> None:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--executor ray needs Ray: pip install 'pkb[ray]' (or use --executor local)") from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (_root(), os.environ.get(
                     "PYTHONPATH")) if p)}})

    @ray.remote(max_retries=0, memory=int(memory_gb * 2**30) if memory_gb > 0 else None)
    def screen_remote(job: dict) -> dict:
        from pkbsim.screen.worker import limit_memory, screen_job
        limit_memory(memory_gb)
        return screen_job(job)

    try:
        _collect(ray, {screen_remote.remote(j): (j, time.monotonic() + time_limit) for j in jobs}, time_limit,
                 on_result)
    finally:
        if started_here:  # a local instance's processes must not outlive the batch
            ray.shutdown()


def _collect(ray, pending: dict, time_limit: float, on_result: Callable[[dict], None]) -> None:
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
        for ref in ready:
            job, _ = pending.pop(ref)
            try:
                on_result(ray.get(ref))
            except Exception as e:  # noqa: BLE001 - a worker that died is a result, not a crash of the batch
                on_result(inconclusive(job, "worker_crash", f"the Ray worker failed: {type(e).__name__}: {e}"))
        now = time.monotonic()
        for ref, (job, deadline) in list(pending.items()):
            if now > deadline:
                ray.cancel(ref, force=True)
                pending.pop(ref)
                on_result(inconclusive(job, "time_limit", f"the screen took longer than --time-limit {time_limit:g} s"))


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
