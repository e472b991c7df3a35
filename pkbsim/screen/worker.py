"""A screening worker process: `python -m pkbsim.screen.worker --memory-gb G`.

Reads one job per line (JSON) on stdin and answers one result per line on the protocol pipe. The
candidate's own prints cannot corrupt the protocol: fd 1 is pointed at stderr once the pipe is saved.
Reference runs and traces stay cached in the process across jobs of the same task.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys


def limit_memory(gb: float) -> None:
    if gb > 0:
        cap = int(gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def failed(job: dict, kind: str, message: str, verdict: str = "reject") -> dict:
    """A result for a job that ended without a screen result (limit hit, crash, broken reference)."""
    return {"task": job["task"], "candidate": job["candidate"], "world_size": job["world_size"],
            "topology": job["topology"], "seed": job["seed"], "verdict": verdict, "stage": kind,
            "reasons": [{"kind": kind, "message": message, "site": ""}], "correct": None, "findings": [],
            "predicted": None, "timeline": None, "checked": [], "not_simulated": [], "compile": None, "seconds": {}}


def screen_job(job: dict) -> dict:
    from pkbsim.screen.functional import ReferenceFailed
    from pkbsim.screen.pipeline import ScreenOptions, screen
    from pkbsim.timing.topology import load_topology
    from tasks.registry import get

    if job.get("pkb_root"):
        from pkbsim.screen.pkb_interop import register_pkb_tasks
        register_pkb_tasks(job["pkb_root"])
    opts = ScreenOptions(job["world_size"], load_topology(job["topology"]), job["seed"], job["margin"],
                         job["timeout"], job.get("timeline"), job.get("cost", True))
    try:
        return screen(get(job["task"]), job["candidate"], opts).to_json()
    except ReferenceFailed as e:
        return failed(job, "reference", str(e), verdict="error")
    except MemoryError:
        return failed(job, "memory", "the screen ran out of its memory limit (--memory-gb)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memory-gb", type=float, default=0)
    args = ap.parse_args()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    limit_memory(args.memory_gb)
    import torch._subclasses.fake_tensor  # noqa: F401 - the shape runs' machinery (several seconds to import)

    import pkbsim.screen.pipeline  # noqa: F401 - import once per worker, not in the first candidate's time
    for line in sys.stdin:
        job = json.loads(line)
        proto.write(json.dumps(screen_job(job)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
