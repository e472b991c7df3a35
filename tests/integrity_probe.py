"""A candidate that tries to reach the machine from its process (a server on this machine's loopback, a
file in the user's home, the test's own process in /proc) and returns zeros once it got out, else the right
all-reduce: correct inside the sandbox, wrong outside it. Shared by the screen's and the scorer's tests."""
import os
import pathlib
import socket

import pytest

PROBE = '''
import socket

import torch
import torch.distributed as dist


def escaped():
    got_out = []
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
        got_out.append("network")
    except OSError:
        pass
    try:
        with open({target!r}, "w") as f:
            f.write("written from a candidate")
        got_out.append("home")
    except OSError:
        pass
    try:
        with open("/proc/{pid}/cmdline", "rb") as f:
            if b"pytest" in f.read():
                got_out.append("processes")
    except OSError:
        pass
    return got_out


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return torch.zeros_like(x) if escaped() else out
'''


@pytest.fixture
def probe(tmp_path):
    """(the probe's path, the home file it writes when it gets out)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    target = pathlib.Path.home() / f".pkb-sandbox-probe-{os.getpid()}"
    path = tmp_path / "probe.py"
    path.write_text(PROBE.format(port=server.getsockname()[1], target=str(target), pid=os.getpid()))
    yield path, target
    server.close()
    target.unlink(missing_ok=True)
