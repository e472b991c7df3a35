"""Exploit class: a screening worker whose zygote (the process every candidate is forked from) is gone.
A candidate can no longer name it, but it can still die (memory, a bug of pkb): the worker must not answer
"pkb failed" for every later candidate, which would be charged to honest ones. It ends with its own exit
status and answers nothing; the pool starts a fresh worker for the job. Twin: a worker with its zygote
answers the job."""
import json
import os
import signal
import subprocess
import sys
import time

from hostile import path

from pkb.batch.job import ScreenJob
from pkb.batch.worker import ZYGOTE_GONE_EXIT


def _worker() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pkb.batch.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def _send(proc: subprocess.Popen) -> None:
    job = ScreenJob("all_reduce", path("honest_all_reduce.py"), 2, "hgx-h100", 1, cost=False)
    proc.stdin.write(json.dumps({"id": "job-1", "job": job.to_json()}) + "\n")
    proc.stdin.flush()


def _zygote(proc: subprocess.Popen) -> int:
    deadline = time.monotonic() + 300
    while not _children(proc.pid):   # the worker forks its zygote once its imports are done
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    return _children(proc.pid)[0]


def test_a_worker_without_its_zygote_ends_and_answers_nothing():
    proc = _worker()
    try:
        os.kill(_zygote(proc), signal.SIGKILL)
        _send(proc)
        assert proc.stdout.readline() == ""
        assert proc.wait(timeout=120) == ZYGOTE_GONE_EXIT
    finally:
        proc.kill()


def test_the_twin_with_its_zygote_answers_the_job():
    proc = _worker()
    try:
        _zygote(proc)
        _send(proc)
        answer = json.loads(proc.stdout.readline())
        assert (answer["id"], answer["result"]["verdict"]) == ("job-1", "pass")
    finally:
        proc.kill()
