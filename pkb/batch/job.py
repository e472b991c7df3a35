"""One candidate to screen: what `pkb run` and `pkb refine` plan, the pool and Ray hand to a screening
worker, and the worker reads. JSON only where it crosses a process (one line per job on a worker's stdin,
a Ray task's argument)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pkbsim import MARGIN, RUN_TIMEOUT_S
from tasks.parallelkernelbench.naming import DEFAULT_DTYPE


@dataclass
class ScreenJob:
    task: str
    candidate: str
    world_size: int
    topology: str
    seed: int
    margin: float = MARGIN
    timeout: float = RUN_TIMEOUT_S
    timeline: str | None = None       # where the simulated timeline goes (None: nowhere)
    parallelkernelbench_root: str | None = None       # the ParallelKernelBench checkout the task comes from, if any
    parallelkernelbench_dtype: str = DEFAULT_DTYPE       # the dtype of its inputs
    cost: bool = True                 # predict the time at full size after the functional stage
    sha: str | None = None            # the content key the results store files it under (batch.resume)
    sizes_budget: float | None = None  # seconds for the sizes stage (None: the screen's default; 0: no stage)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> ScreenJob:
        return cls(**doc)
