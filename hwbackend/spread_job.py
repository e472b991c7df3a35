"""This node's share of a scoring job whose world spans several nodes: the same torchrun session,
environment and process-tree cleanup as a one-node job, with torchrun joining the c10d rendezvous."""
from __future__ import annotations

from hwbackend.job_spec import JobSpec
from hwbackend.jobs import Job
from hwbackend.rendezvous import Rendezvous


class SpreadJob(Job):
    def __init__(self, spec: JobSpec, rdzv: Rendezvous, rdzv_id: str, node: int = 0):
        super().__init__(spec)
        self.rdzv, self.rdzv_id, self.node = rdzv, rdzv_id, node
        self.world_size = spec.nproc * rdzv.nnodes

    def launcher_args(self) -> list[str]:
        return self.rdzv.torchrun_args(self.spec.nproc, self.rdzv_id, self.spec.timeout, self.node)

    def _env(self, control: str) -> dict:
        return super()._env(control) | self.rdzv.env()
