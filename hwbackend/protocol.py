"""The scorer <-> rank-worker channel: JSON lines over a Unix socket.

The worker never receives the secret seed: only per-call seeds derived from it, at the moment each
phase starts, so future inputs cannot be known in advance.
"""
from __future__ import annotations

import json
import socket


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.file = sock.makefile("rwb", buffering=0)

    def send(self, **msg) -> None:
        self.file.write((json.dumps(msg) + "\n").encode())

    def recv(self) -> dict:
        line = self.file.readline()
        if not line:
            raise ConnectionError("peer closed the channel")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.file.close()
        finally:
            self.sock.close()


def connect(path: str) -> Channel:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return Channel(s)
