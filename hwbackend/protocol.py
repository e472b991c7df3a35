"""The scorer <-> rank-worker channel: JSON lines over a Unix socket, or over TCP when the job spans
nodes (address `tcp://HOST:PORT/TOKEN`: the first line a TCP peer sends is the token, so a stray
connection to the scorer's port is turned away).

The worker never receives the secret seed: only per-call seeds derived from it, at the moment each
phase starts, so future inputs cannot be known in advance.
"""
from __future__ import annotations

import json
import os
import socket

from candidate_sandbox.untrusted_file import UntrustedFile, open_regular


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.file = sock.makefile("rwb", buffering=0)

    def send(self, **msg) -> None:
        """One message, whole: `sendall`, not the raw file's `write`, which on a socket with a timeout (the scorer
        sets one while it waits) sends what fits in the socket's buffer and drops the rest. A batch's seeds of
        6549 calls (288 KB) lost their end so, and the rank waited for them until the scorer's deadline."""
        self.sock.sendall((json.dumps(msg) + "\n").encode())

    def recv(self) -> dict:
        line = self.file.readline()
        if not line:
            raise ConnectionError("peer closed the channel")
        return json.loads(line)

    def send_file(self, path: str, **header) -> None:
        """A header line announcing the file's size, then its bytes (a regular file only, opened without
        following a link or blocking: OSError otherwise)."""
        try:
            fd = open_regular(path)
        except UntrustedFile as e:
            raise OSError(str(e)) from None
        with os.fdopen(fd, "rb") as f:
            self.send(**header, bytes=os.fstat(f.fileno()).st_size)
            self.sock.sendfile(f)

    def recv_file(self, header: dict, path: str) -> None:
        """Write the bytes announced by `header` (from recv) to `path`."""
        left = header["bytes"]
        with open(path, "wb") as f:
            while left:
                chunk = self.file.read(min(left, 1 << 20))
                if not chunk:
                    raise ConnectionError("peer closed the channel in the middle of a file")
                f.write(chunk)
                left -= len(chunk)

    def close(self) -> None:
        try:
            self.file.close()
        finally:
            self.sock.close()


TCP_SCHEME = "tcp://"


def tcp_address(host: str, port: int, token: str) -> str:
    return f"{TCP_SCHEME}{host}:{port}/{token}"


UNIX_PATH_MAX = 107  # bytes of a socket's path the kernel takes (sun_path, less its terminating NUL)


def unix_call(sock: socket.socket, path: str, call: str) -> None:
    """`sock.bind(path)` or `sock.connect(path)` (`call`), however long the path: a longer one than the kernel
    takes (a job folder deep in a user's tree) is reached through its folder's descriptor in /proc/self/fd."""
    if len(os.fsencode(path)) <= UNIX_PATH_MAX:
        getattr(sock, call)(path)
        return
    folder = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        getattr(sock, call)(f"/proc/self/fd/{folder}/{os.path.basename(path)}")
    finally:
        os.close(folder)


def connect(address: str) -> Channel:
    """A Unix socket path, or a `tcp_address` (then the token is sent first)."""
    if not address.startswith(TCP_SCHEME):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix_call(s, address, "connect")
        return Channel(s)
    hostport, token = address[len(TCP_SCHEME):].rsplit("/", 1)
    host, port = hostport.rsplit(":", 1)
    ch = Channel(socket.create_connection((host, int(port))))
    ch.send(token=token)
    return ch


def said(texts: list[str], call: str | None = None) -> list[dict]:
    """A rank's findings about itself as they cross the channel: what it saw, and in which call."""
    return [{"call": call, "text": t} for t in texts]


def heard(reply: dict) -> list[tuple[str | None, str]] | None:
    """The (call, text) findings of a rank's reply; None where the reply is not in `said`'s form (its process
    rewrote the channel)."""
    items = reply.get("findings", [])
    if not isinstance(items, list):
        return None
    out = []
    for x in items:
        if not (isinstance(x, dict) and isinstance(x.get("text"), str) and isinstance(x.get("call"), (str, type(None)))):
            return None
        out.append((x["call"], x["text"]))
    return out
