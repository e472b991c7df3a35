"""This node's share of a scoring job whose world spans several nodes: the same torchrun session,
environment and process-tree cleanup as a one-node job, with torchrun joining the c10d rendezvous."""
from __future__ import annotations

from hwbackend.jobs import Job
from hwbackend.rendezvous import Rendezvous


class SpreadJob(Job):
    def __init__(self, rdzv: Rendezvous, rdzv_id: str, role: str, task: str, nproc: int, backend: str,
                 timeout: float, preset: str = "screen", candidate: str | None = None, node: int = 0):
        super().__init__(role, task, nproc, backend, timeout, preset, candidate)
        self.rdzv, self.rdzv_id, self.node = rdzv, rdzv_id, node
        self.world_size = nproc * rdzv.nnodes

    def launcher_args(self) -> list[str]:
        return self.rdzv.torchrun_args(self.nproc, self.rdzv_id, self.timeout, self.node)

    def _env(self, control: str) -> dict:
        return super()._env(control) | self.rdzv.env()
