"""What `pkb run` asks for and what it hands out, typed once at the command: a BatchRequest (the batch as
parsed), and one ScreenJob per candidate, which `pkb run` and `pkb refine` plan, the pool and Ray hand to a
screening worker, and the worker reads. JSON only where a job crosses a process (one line per job on a
worker's stdin, a Ray task's argument)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pkbsim import MARGIN, RUN_TIMEOUT_S
from tasks.parallelkernelbench.naming import Checkout


@dataclass(frozen=True)
class BatchRequest:
    """A batch as `pkb run` parsed it (pkb/cli/run_cmd.py); batch.plan turns it into jobs."""
    db: str                                # the results file; the timelines go beside it
    candidates: tuple[str, ...] = ()       # files or folders (none: the built-in set)
    tasks: tuple[str, ...] = ()            # only these tasks (one: every file is for it)
    checkout: Checkout | None = None       # the ParallelKernelBench checkout whose problems become tasks
    topology: str | None = None            # None: the task's default topology
    world_size: int | None = None          # None: the largest the task and topology allow, 8 first
    seed: int | None = None                # None: a random seed for the whole batch
    margin: float = MARGIN
    timeout: float = RUN_TIMEOUT_S
    cost: bool = True                      # predict the time at full size after the functional stage
    sizes_budget: float | None = None      # seconds for the sizes stage (None: the screen's default; 0: none)


@dataclass(frozen=True)
class ScreenJob:
    task: str
    candidate: str
    world_size: int
    topology: str
    seed: int
    margin: float = MARGIN
    timeout: float = RUN_TIMEOUT_S
    timeline: str | None = None       # where the simulated timeline goes (None: nowhere)
    checkout: Checkout | None = None  # the ParallelKernelBench checkout the task comes from, if any
    cost: bool = True                 # predict the time at full size after the functional stage
    sha: str | None = None            # the content key the results store files it under (batch.resume)
    sizes_budget: float | None = None  # seconds for the sizes stage (None: the screen's default; 0: no stage)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> ScreenJob:
        return cls(**doc | {"checkout": Checkout.from_json(doc.get("checkout"))})
