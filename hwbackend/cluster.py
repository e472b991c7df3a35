"""Node 0's link to the other nodes of a scoring session.

The pkb process of every other node (its agent, hwbackend/node_agent.py) finds node 0 through the
rendezvous store, connects, and from then on starts, reports on and stops its share of each job when
node 0 says so. A node that never joins, whose torchrun launcher is killed, or whose pkb process goes
away is a node failure: the scorer reports it, naming the node, instead of the errors it causes on the
other nodes' ranks.
"""
from __future__ import annotations

import json
import os
import secrets
import select
import signal
import socket
import time
import uuid

from hwbackend.job_spec import JobSpec
from hwbackend.jobs import JobFailure
from hwbackend.protocol import Channel, tcp_address
from hwbackend.result import FailureKind
from hwbackend.rendezvous import CONTROL_KEY, Rendezvous, bind_listener, host_store

REPORT_GRACE = 2.0   # how long a failure waits for a node's report of what caused it
STATUS_WAIT = 3.0
FINISH_WAIT = 30.0   # an agent waits up to 10 s for its launcher, then ships the outputs


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _node_list(nodes) -> str:
    nodes = sorted(nodes)
    return ("node " if len(nodes) == 1 else "nodes ") + ", ".join(map(str, nodes))


class Cluster:
    def __init__(self, rdzv: Rendezvous, timeout: float):
        self.rdzv, self.timeout = rdzv, timeout
        self.store = host_store(rdzv.host, rdzv.port, timeout)
        self.listener = bind_listener(rdzv.host)
        self.token = secrets.token_hex(16)
        self.session = uuid.uuid4().hex[:8]
        self.agents: dict[int, Channel] = {}
        self.hosts: dict[int, str] = {}     # node -> the host name its agent reported
        self.failed: dict[int, str] = {}    # node -> why it failed
        self.notes: dict[int, str] = {}     # node -> what its launcher said when it ended early
        self.jobs = 0
        address = tcp_address(rdzv.host, self.listener.getsockname()[1], self.token)
        self.store.set(CONTROL_KEY, json.dumps({"address": address, "session": self.session}))

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def nnodes(self) -> int:
        return self.rdzv.nnodes

    def admit(self, conn: socket.socket) -> Channel | None:
        """A connection that opens with this session's token, else None (and it is closed)."""
        conn.settimeout(5.0)
        ch = Channel(conn)
        try:
            if ch.recv().get("token") == self.token:
                conn.settimeout(None)
                return ch
        except (OSError, ValueError, AttributeError):
            pass
        ch.close()
        return None

    def wait_for_nodes(self, nproc: int) -> None:
        """Every other node's agent, or a node failure naming those that never joined."""
        deadline = time.monotonic() + self.timeout
        while len(self.agents) < self.nnodes - 1:
            left = deadline - time.monotonic()
            missing = set(range(1, self.nnodes)) - set(self.agents)
            if left <= 0:
                raise JobFailure(FailureKind.NODE_FAILURE, f"{_node_list(missing)} never joined the rendezvous at "
                                 f"{self.rdzv.host}:{self.rdzv.port} within {self.timeout:g} s",
                                 details="run the same `pkb score` command there, with --node-rank set to the "
                                         "node's number")
            self.listener.settimeout(left)
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            ch = self.admit(conn)
            if ch is None:
                continue
            try:
                ch.sock.settimeout(5.0)
                hello = ch.recv()
                ch.sock.settimeout(None)
            except (OSError, ValueError):
                ch.close()
                continue
            reason = self._refusal(hello, missing, nproc)
            if reason:
                ch.send(cmd="reject", reason=reason)
                ch.close()
                continue
            self.agents[hello["node"]] = ch
            self.hosts[hello["node"]] = str(hello.get("host", "?"))

    def _refusal(self, hello: dict, missing: set[int], nproc: int) -> str:
        node = hello.get("node")
        if hello.get("nnodes") != self.nnodes or hello.get("nproc") != nproc:
            return (f"node {node} was started with --nnodes {hello.get('nnodes')} --nproc-per-node "
                    f"{hello.get('nproc')}, node 0 with --nnodes {self.nnodes} --nproc-per-node {nproc}: pass the "
                    f"same options on every node")
        if node not in missing:
            return (f"--node-rank {node} is already taken or out of range (1..{self.nnodes - 1}): give each node "
                    f"its own --node-rank")
        return ""

    def next_rdzv_id(self, role: str) -> str:
        self.jobs += 1
        return f"pkb-{self.session}-{self.jobs}-{role}"

    def start_job(self, spec: JobSpec, rdzv_id: str, control: str) -> None:
        """Every other node starts its share of the job; the candidate's file goes with the command."""
        source = None
        if spec.candidate:
            with open(spec.candidate) as f:
                source = {"name": os.path.basename(spec.candidate), "text": f.read()}
        job = spec.to_json() | {"candidate": None}  # a path on this node: the agent writes the source there
        self._send_all(cmd="start", job=job, rdzv_id=rdzv_id, control=control, candidate=source)

    def check(self) -> None:
        """Raise the node failure if a node has reported one (or has gone away)."""
        self._poll(0.0)
        if self.failed:
            raise self._failure("")

    def explain(self, failure: JobFailure) -> JobFailure:
        """The failure as the scorer should report it: a node's failure, when one caused it."""
        if failure.kind == FailureKind.NODE_FAILURE:
            return failure
        self._poll(REPORT_GRACE)
        if self.failed:
            return self._failure(f"{failure.message}\n{failure.details}".strip())
        if self.notes:
            failure.details = "\n".join([failure.details] + [f"node {n}: {m}" for n, m in sorted(self.notes.items())])
        return failure

    def _failure(self, seen_elsewhere: str) -> JobFailure:
        node, why = min(self.failed.items())
        details = f"what the other ranks saw: {seen_elsewhere}" if seen_elsewhere else ""
        return JobFailure(FailureKind.NODE_FAILURE, f"node {node} ({self.hosts.get(node, '?')}) failed: {why}",
                          details=details)

    def status(self) -> tuple[dict[int, str], list[int]]:
        """(what each rank on the other nodes last said it was doing, the nodes that did not answer)."""
        replies = self._request("status", STATUS_WAIT)
        ranks = {int(r): text for reply in replies.values() for r, text in reply["ranks"].items()}
        return ranks, sorted(set(self.agents) - set(replies))

    def finish_job(self) -> None:
        """Ask every node to end its share of the job (without waiting: see collect_finished)."""
        self._send_all(cmd="finish")

    def collect_finished(self, out_dir: str) -> int:
        """Receive every node's outputs into `out_dir`; returns the processes their cleanup had to kill."""
        def receive(ch: Channel, reply: dict) -> None:
            for _ in range(reply["files"]):
                header = ch.recv()
                ch.recv_file(header, os.path.join(out_dir, os.path.basename(header["name"])))
        replies = self._request(None, FINISH_WAIT, receive)
        return sum(r["leftovers"] for r in replies.values())

    def close(self) -> None:
        self._send_all(cmd="bye")
        for ch in self.agents.values():
            ch.close()
        self.agents.clear()
        self.listener.close()
        self.store = None

    def _send_all(self, **msg) -> None:
        for node, ch in list(self.agents.items()):
            try:
                ch.send(**msg)
            except OSError:
                self._lost(node)

    def _lost(self, node: int) -> None:
        self.failed.setdefault(node, "its pkb process went away (the connection to node 0 closed)")
        self.agents.pop(node).close()

    def _request(self, cmd: str | None, wait: float, on_reply=None) -> dict[int, dict]:
        """Send `cmd` (if any) to every agent and take one reply from each within `wait` seconds."""
        if cmd:
            self._send_all(cmd=cmd)
        replies: dict[int, dict] = {}
        deadline = time.monotonic() + wait
        while set(self.agents) - set(replies) and time.monotonic() < deadline:
            waiting = {ch.sock: node for node, ch in self.agents.items() if node not in replies}
            for node, msg in self._read(waiting, deadline - time.monotonic()):
                try:
                    if on_reply:
                        on_reply(self.agents[node], msg)
                    replies[node] = msg
                except (OSError, ValueError, KeyError):
                    self._lost(node)
        return replies

    def _poll(self, wait: float) -> None:
        """Take in the reports the agents sent on their own."""
        deadline = time.monotonic() + wait
        while True:
            list(self._read({ch.sock: node for node, ch in self.agents.items()}, deadline - time.monotonic()))
            if self.failed or time.monotonic() >= deadline:
                return

    def _read(self, socks: dict, wait: float):
        """Messages that arrive within `wait`; a node's own report of its launcher's end is recorded, not
        yielded; a closed connection is a lost node."""
        if not socks:
            time.sleep(max(0.0, min(wait, 0.05)))
            return
        for sock in select.select(list(socks), [], [], max(0.0, wait))[0]:
            node = socks[sock]
            try:
                msg = self.agents[node].recv()
            except (OSError, ValueError):
                self._lost(node)
                continue
            if msg.get("event") == "launcher_ended":
                (self.failed if msg["failure"] else self.notes)[node] = msg["why"]
            else:
                yield node, msg
