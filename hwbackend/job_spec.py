"""What one scoring job runs: the role (reference or candidate), the task and its size preset, the ranks
per node, the backend, the time limit and, for the candidate, its file. One object from the scorer to the
job classes; JSON only where node 0 sends it to another node's agent."""
from __future__ import annotations

from dataclasses import asdict, dataclass


def default_preset(backend: str) -> str:
    """The input sizes a score runs unless told: full on GPUs (nccl), screen on the CPU (gloo)."""
    return "full" if backend == "nccl" else "screen"


@dataclass(frozen=True)
class JobSpec:
    role: str                     # "reference" or "candidate"
    task: str                     # task slug
    nproc: int                    # ranks on each node
    backend: str                  # "nccl" or "gloo"
    timeout: float                # seconds for the whole job
    preset: str = "screen"        # input sizes
    candidate: str | None = None  # the candidate's file (role "candidate" only)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> JobSpec:
        return cls(**{k: doc[k] for k in cls.__dataclass_fields__ if k in doc})
