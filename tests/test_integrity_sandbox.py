"""Exploit class: a candidate that reaches the machine from its process: the network (a server on this
machine's loopback), the user's home (writes a file), other processes (the screening process is in view
in /proc). Inside the sandbox (the default) none succeeds, so the probe returns the right answer and
passes; its twin is the same file under --no-sandbox, where every probe succeeds and the candidate, which
returns zeros when it got out, is rejected. Also: with no bwrap, a one-line error naming the package."""
import json
import os
import pathlib
import socket

import pytest

from pkbsim.cli.main import main

PROBE = '''
import os
import socket

import torch
import torch.distributed as dist


def escaped():
    got_out = []
    try:
        socket.create_connection(("127.0.0.1", int(os.environ["PKB_PROBE_PORT"])), timeout=2).close()
        got_out.append("network")
    except OSError:
        pass
    try:
        with open(os.environ["PKB_PROBE_FILE"], "w") as f:
            f.write("written from a candidate")
        got_out.append("home")
    except OSError:
        pass
    try:  # the test's own process (a pid of the machine's namespace)
        with open(f"/proc/{os.environ['PKB_PROBE_PID']}/cmdline", "rb") as f:
            if b"pytest" in f.read():
                got_out.append("processes")
    except OSError:
        pass
    return got_out


def solution(x):
    if escaped():
        return torch.zeros_like(x)
    out = x.clone()
    dist.all_reduce(out)
    return out
'''


@pytest.fixture
def probe(tmp_path, monkeypatch):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    target = pathlib.Path.home() / f".pkb-sandbox-probe-{os.getpid()}"
    monkeypatch.setenv("PKB_PROBE_PORT", str(server.getsockname()[1]))
    monkeypatch.setenv("PKB_PROBE_FILE", str(target))
    monkeypatch.setenv("PKB_PROBE_PID", str(os.getpid()))
    path = tmp_path / "probe.py"
    path.write_text(PROBE)
    yield path, target
    server.close()
    target.unlink(missing_ok=True)


def screen(capsys, path, *extra):
    code = main(["screen", str(path), "--task", "all_reduce", "--world-size", "2", "--no-cost", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_inside_the_sandbox_the_candidate_reaches_nothing(capsys, probe):
    path, target = probe
    code, res = screen(capsys, path)
    assert (code, res["verdict"]) == (0, "pass"), res["reasons"]
    assert not target.exists()


def test_without_it_the_same_candidate_gets_out(capsys, probe):
    path, target = probe
    code, res = screen(capsys, path, "--no-sandbox")
    assert (code, res["verdict"], res["reasons"][0]["kind"]) == (1, "reject", "wrong_output")
    assert target.read_text() == "written from a candidate"


def test_no_bwrap_is_one_line_naming_the_package(capsys, probe, monkeypatch):
    path, _ = probe
    monkeypatch.setenv("PKB_BWRAP", "")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["screen", str(path), "--task", "all_reduce", "--world-size", "2", "--no-cost"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "apt-get install bubblewrap" in err and "--no-sandbox" in err
