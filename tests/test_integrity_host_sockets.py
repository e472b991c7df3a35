"""Exploit class: a candidate that talks to a service of the machine through its path-named Unix socket (a
read-only bind of the file system does not stop connect(): a Docker or database socket under /run, an agent's
socket in the user's home). Inside the sandbox /run, /var/lib, /var/tmp, /root and /home are empty read-only
tmpfs mounts (candidate_sandbox.HIDDEN) with only what pkb needs bound back, so a probe inside reaches none of
the sockets listening there, while the same probe outside reaches each; the Python install under the home
folder, the repository and the build cache stay usable inside. An abstract socket is out of reach too (the
sandbox has a network namespace of its own). `pkb screen`: a candidate that returns zeros once it reaches a
socket passes inside the sandbox and is rejected under --no-sandbox."""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys

import pytest

import candidate_sandbox as sandbox

from conftest import screen_json

PROBE = '''
import json, socket, sys
reached = []
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(path if not path.startswith("@") else "\\0" + path[1:])
        reached.append(path)
    except OSError:
        pass
    finally:
        s.close()
print(json.dumps(reached))
'''


@pytest.fixture
def sockets():
    """Listening Unix sockets of this machine: one under /run, one in the home folder, one abstract."""
    run_dir = pathlib.Path(f"/run/pkb-socket-probe-{os.getpid()}")
    run_dir.mkdir(exist_ok=True)
    paths = [str(run_dir / "service.sock"), str(pathlib.Path.home() / f".pkb-socket-probe-{os.getpid()}.sock"),
             f"@pkb-socket-probe-{os.getpid()}"]
    servers = []
    for path in paths:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path if not path.startswith("@") else "\0" + path[1:])
        s.listen(16)
        servers.append(s)
    yield paths
    for s in servers:
        s.close()
    os.unlink(paths[1])
    shutil.rmtree(run_dir)


def _probe(cmd_prefix, paths):
    proc = subprocess.run([*cmd_prefix, sys.executable, "-c", PROBE, *paths], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_inside_the_sandbox_no_socket_of_the_machine_is_reached(sockets):
    assert _probe(sandbox.prefix(), sockets) == []


def test_outside_the_same_probe_reaches_each(sockets):
    assert _probe([], sockets) == sockets


def test_what_pkb_needs_below_the_hidden_folders_stays_usable():
    # the interpreter's install (here under /root/.pyenv), torch, the repository; the build cache writable
    cache = sandbox.build_cache()
    code = ("import os, sys, torch, candidate_sandbox; p = os.path.join(os.environ['PKB_CACHE_DIR'], 'probe-%d');"
            " open(p, 'w').write('x'); os.remove(p); print(sys.base_prefix)" % os.getpid())
    proc = subprocess.run([*sandbox.prefix([cache]), sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == sys.base_prefix, proc.stderr
    # and nothing else there can be written (no socket can be made, no memory held)
    hidden = sandbox.hidden_roots()
    code = "import sys\nfor root in sys.argv[1:]:\n    try:\n        open(root + '/w', 'w')\n        print(root)\n    except OSError:\n        pass\n"
    proc = subprocess.run([*sandbox.prefix(), sys.executable, "-c", code, *hidden], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout == "" and hidden, (proc.stdout, proc.stderr)


CANDIDATE = '''
import socket

import torch
import torch.distributed as dist


def reached():
    for path in {paths!r}:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return True
        except OSError:
            pass
        finally:
            s.close()
    return False


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return torch.zeros_like(x) if reached() else out
'''


def _screen(capsys, tmp_path, paths, *extra):
    path = tmp_path / "talks_to_sockets.py"
    path.write_text(CANDIDATE.format(paths=[p for p in paths if not p.startswith("@")]))
    return screen_json(capsys, path, *extra)


def test_a_screened_candidate_reaches_no_socket_inside_the_sandbox(capsys, tmp_path, sockets):
    code, res = _screen(capsys, tmp_path, sockets)
    assert (code, res["verdict"]) == (0, "pass"), res["reasons"]


def test_its_twin_without_the_sandbox_reaches_them(capsys, tmp_path, sockets):
    code, res = _screen(capsys, tmp_path, sockets, "--no-sandbox")
    assert (code, res["verdict"], res["reasons"][0]["kind"]) == (1, "reject", "wrong_output"), res
