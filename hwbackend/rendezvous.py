"""Where the nodes of one scoring job meet: torchrun's c10d rendezvous at HOST:PORT.

Node 0 (the node that runs the trusted scorer) hosts the rendezvous store itself for the whole scoring
session, so every torchrun launcher of every job, on every node, joins it as a client (`is_host=0`),
each job under a rendezvous id of its own. The same store tells the other nodes' pkb processes where
the scorer listens. When HOST is a loopback address, all "nodes" are processes of this one machine:
torchrun, gloo and NCCL are then kept on the loopback interface too.
"""
from __future__ import annotations

import datetime
import ipaddress
import socket
from dataclasses import dataclass

CONTROL_KEY = "pkb/control"


class EndpointError(ValueError):
    """A --rdzv-endpoint that cannot be used; the message names the fix."""


def parse_endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise EndpointError(f"--rdzv-endpoint {text!r} is not HOST:PORT; pass e.g. node0.cluster:29400")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Rendezvous:
    """The meeting point of one scoring session's nodes."""
    host: str
    port: int
    nnodes: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def torchrun_args(self, nproc: int, rdzv_id: str, join_timeout: float, node: int = 0) -> list[str]:
        """torchrun's options for one job over all the nodes, on node `node`. Global rank = torchrun's node
        (group) rank * nproc + local rank: node-major, local rank = GPU index, the layout the inter-node
        tasks use."""
        args = [f"--nnodes={self.nnodes}", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={self.host}:{self.port}", f"--rdzv-id={rdzv_id}",
                f"--rdzv-conf=is_host=0,join_timeout={max(1, int(join_timeout))}"]
        if self.loopback:  # else torchrun tells the workers the machine's own name
            args.append(f"--local-addr={self.local_addr(node)}")
        return args

    def local_addr(self, node: int) -> str:
        """A loopback address of the node's own (127.0.0.1 for node 0, 127.0.0.2 for node 1, ...): torchrun
        tells nodes apart by (address, process id), and the "nodes" of one machine run their launchers in
        sandboxes whose PID namespaces give them all the same process id."""
        try:
            return str(ipaddress.ip_address(socket.gethostbyname(self.host)) + node)
        except (OSError, ValueError):  # an IPv6 loopback (::1 has no neighbours)
            return self.host

    def env(self) -> dict:
        """Keep gloo's and NCCL's own sockets on the loopback interface when the nodes are one machine."""
        return {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"} if self.loopback else {}


def host_store(host: str, port: int, timeout: float):
    """Node 0: the rendezvous store every launcher of this session joins."""
    import torch.distributed as dist

    try:
        return dist.TCPStore(host, port, is_master=True, wait_for_workers=False, multi_tenant=True,
                             timeout=datetime.timedelta(seconds=timeout))
    except (RuntimeError, ValueError) as e:
        raise EndpointError(f"cannot host the rendezvous at {host}:{port} ({_first_line(e)}); node 0 must run "
                            f"on HOST and PORT must be free: pick another port") from None


def join_store(host: str, port: int, timeout: float):
    """Nodes 1..N-1: wait (up to `timeout`) for node 0's store."""
    import torch.distributed as dist

    try:
        return dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout))
    except (RuntimeError, ValueError, TimeoutError) as e:
        raise EndpointError(f"node 0 did not open the rendezvous at {host}:{port} within {timeout:g} s "
                            f"({_first_line(e)}); start `pkb score --node-rank 0` there") from None


def bind_listener(host: str) -> socket.socket:
    """A TCP listener on node 0's rendezvous address (the address the other nodes reach it by)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.bind((host, 0))
    listener.listen(128)
    return listener


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
