"""Nodes 1..N-1 of a scoring session: `pkb score --node-rank R` (R > 0) runs this node's agent.

The agent finds node 0 through the rendezvous store, then runs this node's share of each job when node
0 says so: torchrun in a session of its own, with the candidate's source as node 0 sent it. It never
sees seeds or reference outputs; its ranks talk to node 0's scorer directly. It watches its launcher
(a launcher that dies takes its workers with it, and node 0 is told why), enforces the job's timeout
itself, and at the end kills the whole process tree (orphans included: it is their subreaper) and
ships its ranks' outputs to node 0.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import stat
import sys
import time
from dataclasses import dataclass, replace

from hwbackend.cluster import describe_exit
from hwbackend.job_spec import JobSpec
from hwbackend.jobs import become_subreaper
from hwbackend.protocol import Channel, connect
from hwbackend.rendezvous import CONTROL_KEY, EndpointError, Rendezvous, join_store
from hwbackend.spread_job import SpreadJob

POLL = 0.2
GRACE = 5.0  # beyond the job's timeout, node 0 has had its chance to end the job itself


@dataclass
class AgentResult:
    node: int
    jobs: int
    error: str = ""


def serve(rdzv: Rendezvous, node: int, nproc: int, timeout: float) -> AgentResult:
    """Join node 0's session and serve it until it says goodbye, goes away or stays silent too long."""
    become_subreaper()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a cancelled step still cleans up
    try:
        store = join_store(rdzv.host, rdzv.port, timeout)
        control = json.loads(store.get(CONTROL_KEY))
        ch = connect(control["address"])
    except EndpointError as e:
        return AgentResult(node, 0, str(e))
    except (RuntimeError, OSError, ValueError) as e:
        return AgentResult(node, 0, f"could not reach node 0's scorer through {rdzv.host}:{rdzv.port}: {e}")
    ch.send(node=node, nnodes=rdzv.nnodes, nproc=nproc, host=socket.gethostname(), pid=os.getpid())
    return Agent(ch, rdzv, node, timeout).run()


class Agent:
    def __init__(self, ch: Channel, rdzv: Rendezvous, node: int, timeout: float):
        self.ch, self.rdzv, self.node, self.timeout = ch, rdzv, node, timeout
        self.job: SpreadJob | None = None
        self.stopped = False
        self.jobs = 0

    def run(self) -> AgentResult:
        quiet_since = time.monotonic()
        try:
            while True:
                self._watch_job()
                if not select.select([self.ch.sock], [], [], POLL)[0]:
                    if self.job is None and time.monotonic() - quiet_since > self.timeout + GRACE:
                        return self._result(f"node 0 sent nothing for {self.timeout + GRACE:g} s")
                    continue
                msg = self.ch.recv()
                quiet_since = time.monotonic()
                if msg["cmd"] == "bye":
                    return self._result()
                if msg["cmd"] == "reject":
                    return self._result(f"node 0 turned this node away: {msg['reason']}")
                getattr(self, f"_{msg['cmd']}")(msg)
        except (OSError, ValueError):
            return self._result("node 0 (the scorer) went away; this node's ranks were stopped")
        finally:
            self._stop()
            if self.job is not None:
                shutil.rmtree(self.job.dir, ignore_errors=True)
            self.ch.close()

    def _result(self, error: str = "") -> AgentResult:
        return AgentResult(self.node, self.jobs, error)

    def _start(self, msg: dict) -> None:
        self.job = SpreadJob(JobSpec.from_json(msg["job"]), self.rdzv, msg["rdzv_id"], node=self.node)
        self.stopped = False
        self.jobs += 1
        if msg["candidate"]:
            folder = os.path.join(self.job.dir, "candidate")
            os.makedirs(folder)
            path = os.path.join(folder, os.path.basename(msg["candidate"]["name"]))
            with open(path, "w") as f:
                f.write(msg["candidate"]["text"])
            self.job.spec = replace(self.job.spec, candidate=path)
        try:
            self.job.launch(msg["control"])
        except OSError as e:
            self.stopped = True
            self.ch.send(event="launcher_ended", failure=True, why=f"torchrun could not be started there: {e}")

    def _status(self, msg: dict) -> None:
        self.ch.send(event="status", ranks=self.job.rank_status() if self.job else {})

    def _finish(self, msg: dict) -> None:
        self._stop()
        job, self.job = self.job, None
        # only regular files go (never what a link points to, never a FIFO, which would block the read):
        # anything else planted by the candidate is left behind, and node 0 finds no output there
        files = sorted(f for f in os.listdir(job.out_dir)
                       if stat.S_ISREG(os.lstat(os.path.join(job.out_dir, f)).st_mode)) if job else []
        self.ch.send(event="finished", leftovers=job.leftovers if job else 0, files=len(files))
        for name in files:
            self.ch.send_file(os.path.join(job.out_dir, name), name=name)
        if job:
            shutil.rmtree(job.dir, ignore_errors=True)

    def _watch_job(self) -> None:
        """A launcher that ended before node 0 asked, or a job past its time, is stopped here and now."""
        job = self.job
        if job is None or self.stopped:
            return
        code = job.launcher_exit()
        overdue = time.monotonic() > job.deadline + GRACE
        if code is None and not overdue:
            return
        ranks = sorted(job.rank_status())
        where = (f" (rank {ranks[0]} ran there)" if len(ranks) == 1 else
                 f" (ranks {ranks[0]}-{ranks[-1]} ran there)" if ranks else "")
        if code is None:
            self.ch.send(event="launcher_ended", failure=False,
                         why=f"its share of the job ran past the {job.spec.timeout:g} s limit and was stopped there")
        elif code != 0:
            tail = job.log_tail(600).strip().splitlines()[-3:]
            self.ch.send(event="launcher_ended", failure=code < 0,
                         why=f"its torchrun launcher {describe_exit(code)}{where}"
                             + ("" if code < 0 else ": " + " | ".join(tail)))
        self._stop()

    def _stop(self) -> None:
        if self.job is not None and not self.stopped:
            self.job.finish()
            self.stopped = True
