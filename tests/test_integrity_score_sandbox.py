"""Exploit class, on the scorer: a candidate whose rank processes reach the machine (a server on this
machine's loopback, a file in the user's home, the scoring process in /proc). `pkb score`'s rank workers
run in the sandbox, every rank of a job in one (torchrun and gloo keep working on its own loopback): the
probe reaches nothing and the candidate, which returns zeros once it got out, is correct. The twin is the
same file with the sandbox off, where every probe succeeds and it is scored incorrect."""
import os
import pathlib
import socket

import pytest

from hwbackend.score import score

PROBE = '''
import os
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
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    target = pathlib.Path.home() / f".pkb-score-probe-{os.getpid()}"
    path = tmp_path / "probe.py"
    path.write_text(PROBE.format(port=server.getsockname()[1], target=str(target), pid=os.getpid()))
    yield str(path), target
    server.close()
    target.unlink(missing_ok=True)


def _score(path):
    return score("all_reduce", path, 2, backend="gloo", launches=1, batches=1, calls=2, timeout=60)


@pytest.mark.slow
def test_a_scored_candidate_reaches_nothing_from_the_sandbox(probe):
    path, target = probe
    res = _score(path)
    assert res["correct"], res["findings"]
    assert not target.exists()


@pytest.mark.slow
def test_without_the_sandbox_the_same_candidate_gets_out(probe, monkeypatch):
    path, target = probe
    monkeypatch.setenv("PKB_NO_SANDBOX", "1")
    res = _score(path)
    assert not res["correct"] and res["status"] == "incorrect", res
    assert target.read_text() == "written from a candidate"
