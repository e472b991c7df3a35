"""A scoring job spread over the nodes of a Cluster, driven from node 0.

Every rank, on whatever node, connects to node 0's scorer over TCP (token first); the other nodes'
agents run their share of torchrun and, when the job ends, stop it and ship their ranks' outputs here,
so the scorer compares and times exactly as for a job on one node. A failure on any rank is first
checked against the nodes' own reports, so that a dead node is named rather than its peers' symptoms.
"""
from __future__ import annotations

from hwbackend.cluster import Cluster
from hwbackend.job_spec import JobSpec
from hwbackend.jobs import JobFailure
from hwbackend.protocol import tcp_address
from hwbackend.rendezvous import bind_listener
from hwbackend.result import FailureKind
from hwbackend.spread_job import SpreadJob


class ClusterJob(SpreadJob):
    def __init__(self, cluster: Cluster, spec: JobSpec):
        super().__init__(spec, cluster.rdzv, cluster.next_rdzv_id(spec.role))
        self.cluster = cluster
        self.silent: list[int] = []  # nodes that did not answer the last status request

    def start(self) -> None:
        listener = bind_listener(self.rdzv.host)
        control = tcp_address(self.rdzv.host, listener.getsockname()[1], self.cluster.token)
        self.launch(control)
        self.cluster.start_job(self.spec, self.rdzv_id, control)
        self.accept_ranks(listener)

    def admit(self, conn):
        return self.cluster.admit(conn)

    def check_launcher(self) -> None:
        self.cluster.check()
        super().check_launcher()

    def watch(self) -> None:
        self.cluster.check()

    def gather(self, expect: str = "done") -> list[dict]:
        try:
            return super().gather(expect)
        except JobFailure as failure:
            raise self.cluster.explain(failure) from None

    def send_all(self, **msg) -> None:
        try:
            super().send_all(**msg)
        except OSError:
            raise self.cluster.explain(JobFailure(FailureKind.ERROR, "a rank's channel closed")) from None

    def send_each(self, message) -> None:
        try:
            super().send_each(message)
        except OSError:
            raise self.cluster.explain(JobFailure(FailureKind.ERROR, "a rank's channel closed")) from None

    def rank_status(self) -> dict[int, str]:
        remote, self.silent = self.cluster.status()
        return remote | super().rank_status()

    def last_ops(self) -> str:
        lines = super().last_ops()
        return "\n".join([lines] + [f"node {n}: its pkb process did not answer" for n in self.silent])

    def finish(self) -> None:
        self.cluster.finish_job()
        super().finish()
        self.leftovers += self.cluster.collect_finished(self.out_dir)
