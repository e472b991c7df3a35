"""A screening worker process: `python -m pkb.batch.worker --memory-gb G [--core C]`.

Reads one job per line (JSON, with the id the pool gave it) on stdin and answers one result per line, with
that id, on the protocol pipe. No candidate
runs in this process: each runs in a child forked for it alone by the worker's zygote (isolation.py), so
nothing a candidate patches outlives it or reaches the comparison, the verdict or the next candidate. The
candidate's own prints cannot corrupt the protocol: fd 1 is pointed at stderr once the pipe is saved.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys

from pkb.batch.job import ScreenJob
from pkbsim import EndedBy, Reason, ReasonKind, ScreenResult


def limit_memory(gb: float) -> None:
    if gb > 0:
        cap = int(gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def inconclusive(job: ScreenJob, kind: ReasonKind, message: str) -> ScreenResult:
    """The result of a job that pkb could not finish (a time or memory limit, a crash, a bug of pkb): never
    the candidate's fault, so it goes on to hardware scoring. Its stage is the limit that ended it (EndedBy)."""
    return _unfinished(job).inconclusive(EndedBy(kind), Reason(kind, message)).settle()


def rejected(job: ScreenJob, kind: ReasonKind, message: str) -> ScreenResult:
    """The result of a job whose worker the candidate ended (a sandbox cap it broke: the supervisor's line)."""
    return _unfinished(job).reject(EndedBy.SANDBOX, [Reason(kind, message)]).settle()


def _unfinished(job: ScreenJob) -> ScreenResult:
    return ScreenResult(job.task, job.candidate, job.world_size, job.topology, job.seed)


ZYGOTE_GONE_EXIT = 75   # the worker's exit status when its zygote died: the pool replaces it and retries


def screen_job(job: ScreenJob, spawner=None) -> ScreenResult:
    from pkbsim import ScreenOptions, ZygoteGone, load_topology, register_parallelkernelbench_tasks, screen_candidate
    from tasks.registry import get  # torch: not at module level (main sets the core before any thread starts)

    if job.checkout:  # the job's task known in this process (and in the zygote's children)
        register_parallelkernelbench_tasks(job.checkout.root, dtype=job.checkout.dtype)
    opts = ScreenOptions(job.world_size, load_topology(job.topology), job.seed, job.margin, timeout=job.timeout,
                         timeline=job.timeline, cost=job.cost, checkout=job.checkout,
                         **({} if job.sizes_budget is None else {"sizes_budget": job.sizes_budget}))
    try:
        return screen_candidate(get(job.task), job.candidate, opts, spawner)
    except ZygoteGone:
        raise
    except MemoryError:
        return inconclusive(job, ReasonKind.MEMORY_LIMIT, "the screen ran out of its memory limit (--memory-gb)")
    except Exception as e:  # noqa: BLE001 - a bug of pkb ends this candidate's screen, not the batch
        return inconclusive(job, ReasonKind.PKB_ERROR, f"pkb failed: {type(e).__name__}: {e}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memory-gb", type=float, default=0)
    ap.add_argument("--core", type=int, default=None, help="run on this core alone (the pool gives each worker one)")
    args = ap.parse_args()
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})  # before any thread starts: torch's and the ranks' inherit it
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    limit_memory(args.memory_gb)
    import torch._subclasses.fake_tensor  # noqa: F401 - the shape runs' machinery (several seconds to import)
    import torch._dynamo  # noqa: F401 - torch 2.11 imports it lazily from 8 rank threads at once: "partially
    #                       initialized module 'torch._dynamo'" failed ParallelKernelBench references 80-85

    from pkbsim import ScreenOptions  # noqa: F401 - the screen's pipeline: once per worker, not in a candidate's time
    from pkbsim import Zygote, ZygoteGone
    zygote = Zygote()  # forked now, before any job: each candidate's process is a fresh fork of it
    for line in sys.stdin:
        request = json.loads(line)
        job = ScreenJob.from_json(request["job"])
        try:
            res = screen_job(job, zygote)
        except ZygoteGone:
            return ZYGOTE_GONE_EXIT   # answer nothing: the pool starts a fresh worker for this job
        proto.write(json.dumps({"id": request["id"], "result": res.to_json()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
