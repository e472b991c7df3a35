"""The candidate runs in a process of its own, forked for it alone; what it hands back crosses as data.

A candidate's code can patch anything in the process it runs in: the comparison, the verdict, `json`, the
result pipe, `os._exit`. So the screen forks a child for every candidate (candidate_side.py) and keeps the
reference's outputs, the comparison and the verdict in the parent. The child writes one file with
`torch.save`; the parent reads it with `weights_only=True` (tensors, numbers, strings, containers: no
object of the child's choosing is ever built in the parent). A child that ends without writing it (an
exit, a signal, the time limit) is reported as such, never read as a result. Between the fork and the
candidate's first line the child is confined (confinement.py): a PID and user namespace of its own, no
descriptor of the parent's, no tracing, so it can neither reach the screen nor write its output.

The process a child is forked from must hold nothing the candidate may not see (reference outputs,
another candidate's state): a `Zygote`, forked before the reference runs (by `pkb screen` for its one
candidate, by a pool worker once right after its imports), forks one child per candidate job (a screen may
ask for a second: pipeline._right_when_fresh) and runs nothing else.
"""
from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import io
import json
import os
import re
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch

from candidate_sandbox.untrusted_file import UntrustedFile, open_folder, read_regular
from pkbsim.screen.confinement import STOPPED_EXIT, confine, seal


@dataclass
class ChildExit:
    """How a candidate's process ended, when it handed back nothing."""
    code: int | None = None    # its exit status
    signal: int | None = None  # the signal that killed it
    timed_out: bool = False    # killed by the parent at its time limit
    unreadable: bool = False   # it wrote a result the parent cannot read as plain data
    frames: tuple[tuple[str, int, str], ...] = ()   # (file, line, function) of the thread a fatal signal hit,
    #                                                 innermost first (faulthandler's dump)

    def describe(self) -> str:
        if self.timed_out:
            return "was killed at its time limit"
        if self.unreadable:
            return "handed back a result that is not plain data (tensors, numbers, strings, containers)"
        if self.signal is not None:
            name = signal.Signals(self.signal).name
            if not self.frames:
                return f"died of {name}"
            path, line, fn = self.frames[0]
            return f"died of {name} in {fn} at {path}:{line or '?'}"
        if self.code == STOPPED_EXIT:
            return "stopped itself (a stop signal from its own processes) and was killed"
        return f"exited with status {self.code} before it handed back its results"


FAULT_LOG = "fault.txt"   # in the child's working folder: faulthandler's dump of a fatal signal
RESULT = "result.pt"      # in the child's working folder: what it hands back
RESULT_MAX_BYTES = 1 << 30   # a larger result is not read (outputs at screen size are small)
FAULT_LOG_MAX = 8 << 20   # bytes: a larger fault log is not read
_FATAL = {signal.SIGSEGV, signal.SIGFPE, signal.SIGABRT, signal.SIGBUS, signal.SIGILL}   # what faulthandler dumps
_FRAME = re.compile(r'^\s*File "(.*)", line (\d+|\?\?\?) in (.*)$', re.M)


def _frames(dirfd: int, sig: int) -> tuple[tuple[str, int, str], ...]:
    """The stack faulthandler wrote for the thread a fatal signal hit, innermost first (line 0: unknown); the
    last dump in the file (the candidate writes to it too, so only its tail is read)."""
    if sig not in _FATAL:
        return ()
    try:
        text = read_regular(FAULT_LOG, FAULT_LOG_MAX, dirfd)[-65536:].decode("utf-8", "replace")
    except (FileNotFoundError, UntrustedFile):
        return ()
    text = text[text.rfind("Fatal Python error"):] if "Fatal Python error" in text else text
    return tuple((path, int(line) if line.isdigit() else 0, fn.strip()) for path, line, fn in _FRAME.findall(text))


def _child(job: dict, workdir: str) -> None:
    """In the forked child: confine it (confinement.py), run the job, write its payload into `workdir`
    (atomically), and leave at once."""
    code = 0
    path = os.path.join(workdir, RESULT)
    try:
        confine(tuple(job.get("read_only", ())), workdir, job.get("own_cache", ""))
        # a fatal signal (a native crash) writes the crashing thread's Python stack here, for the parent
        fault = open(os.path.join(workdir, FAULT_LOG), "w")
        faulthandler.enable(fault, all_threads=False)
        os.register_at_fork(after_in_child=faulthandler.disable)   # a process it forks dumps nothing here
        # the parent may have run OpenMP (torch's intra-op threads); a fork has none of its threads, and a
        # parallel region would wait for them forever (the same reason DataLoader workers run one thread)
        torch.set_num_threads(1)
        from pkbsim.screen.candidate_side import run_job
        payload = run_job(job)
        torch.save(payload, path + ".part")
        os.replace(path + ".part", path)
    except BaseException:  # noqa: BLE001 - a bug of pkb in the child: handed back as such, named
        try:
            torch.save({"pkb_error": traceback.format_exc(limit=8)}, path + ".part")
            os.replace(path + ".part", path)
        except BaseException:  # noqa: BLE001
            code = 70
    finally:
        os._exit(code)


def _status(raw: int) -> ChildExit:
    if os.WIFSIGNALED(raw):
        return ChildExit(signal=os.WTERMSIG(raw))
    return ChildExit(code=os.WEXITSTATUS(raw))


class Child:
    """A running candidate process: `result()` waits for it and reads what it handed back.

    The working folder is opened once, by this (trusted) side, when it is made: its files are read through
    that descriptor (candidate_sandbox.untrusted_file), so a candidate that replaces the folder, or plants a
    FIFO, a link or a huge file in it, cannot redirect, stall or flood the read."""

    def __init__(self, pid: int, workdir: str, wait: Callable[[float], ChildExit]):
        self.pid, self.workdir, self._wait = pid, workdir, wait
        self._dirfd = open_folder(workdir)

    def result(self, timeout: float) -> tuple[dict | None, ChildExit]:
        """(payload, how it ended); payload is None when the child wrote none."""
        ended = self._wait(timeout)
        if ended.signal is not None:
            ended = dataclasses.replace(ended, frames=_frames(self._dirfd, ended.signal))
        try:
            if ended.timed_out:
                return None, ended
            try:
                data = read_regular(RESULT, RESULT_MAX_BYTES, self._dirfd)
                payload = torch.load(io.BytesIO(data), weights_only=True)
            except FileNotFoundError:
                return None, ended
            except Exception:  # noqa: BLE001 - not plain data (a child that forged or tore it): nothing handed back
                return None, ChildExit(code=ended.code, signal=ended.signal, unreadable=True)
            return (payload if isinstance(payload, dict) else None), ended
        finally:
            self._close()

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._wait(0)
        self._close()

    def _close(self) -> None:
        os.close(self._dirfd)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _workdir() -> str:
    return tempfile.mkdtemp(prefix="pkb-candidate-")


class ZygoteGone(RuntimeError):
    """A worker's zygote died: no later candidate of that worker can be screened fairly (the worker ends
    and the pool starts a fresh one for the job)."""


class Zygote:
    """A process forked once, before any job ran, that forks one child per candidate on request; children may
    run at once (a screen runs its sizes stage's process beside its functional stage's: pipeline.py).

    Protocol on two pipes: the parent writes a job (one JSON line with its result path); the zygote answers
    `pid N` for the child it forked, and `exit N STATUS` (its raw wait status) once child N has ended, in the
    order they happen: the parent keeps the exits of children it is not waiting for yet."""

    def __init__(self):
        seal()
        to_z, from_p = os.pipe()
        to_p, from_z = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(from_p)
            os.close(to_p)
            self._serve(to_z, from_z)
        os.close(to_z)
        os.close(from_z)
        self.pid = pid
        self._requests = os.fdopen(from_p, "w", buffering=1)
        self._answers = to_p  # read a byte at a time: a buffered reader would hide a line from select()
        self._exits: dict[int, int] = {}   # raw wait statuses of ended children not yet waited for

    def _line(self) -> list[str]:
        line = b""
        while not line.endswith(b"\n"):
            byte = os.read(self._answers, 1)
            if not byte:
                raise ZygoteGone("the screening worker's zygote process is gone")
            line += byte
        return line.decode().split()

    def _exit_of(self, words: list[str]) -> None:
        if words[0] != "exit":
            raise ZygoteGone(f"the screening worker's zygote answered {' '.join(words)!r} out of turn")
        self._exits[int(words[1])] = int(words[2])

    @staticmethod
    def _serve(requests: int, answers: int) -> None:
        """The zygote's loop: fork a child per request line, report each child's end as it happens (SIGCHLD
        wakes the select through a self-pipe); when the requests pipe closes, kill what still runs and leave."""
        code = 0
        try:
            from pkbsim.screen.candidate_side import prepare
            from pkbsim.screen.defaults import PARALLELKERNELBENCH_DTYPE
            wake_r, wake_w = os.pipe()
            os.set_blocking(wake_r, False)
            os.set_blocking(wake_w, False)
            signal.signal(signal.SIGCHLD, lambda *_: None)
            signal.set_wakeup_fd(wake_w)
            running: set[int] = set()
            pending, reading = b"", True
            while reading or running:
                ready, _, _ = select.select([wake_r, requests] if reading else [wake_r], [], [])
                if wake_r in ready:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                for pid in sorted(running):   # its own children only, never a process prepare() ran
                    ended, raw = os.waitpid(pid, os.WNOHANG)
                    if ended:
                        running.discard(pid)
                        os.write(answers, f"exit {pid} {raw}\n".encode())
                if not reading or requests not in ready:
                    continue
                data = os.read(requests, 65536)
                if not data:   # the parent is done: nothing it started is wanted any more
                    reading = False
                    for pid in running:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    continue
                pending += data
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    msg = json.loads(line)
                    try:
                        # the task's code, never a candidate's: cached here for the next forks
                        prepare(msg["job"].get("parallelkernelbench_root"),
                                msg["job"].get("parallelkernelbench_dtype", PARALLELKERNELBENCH_DTYPE))
                    except Exception:  # noqa: BLE001 - the child meets it again and reports it
                        pass
                    child = os.fork()
                    if child == 0:
                        signal.set_wakeup_fd(-1)
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        for fd in (requests, answers, wake_r, wake_w):
                            os.close(fd)
                        _child(msg["job"], msg["workdir"])
                    running.add(child)
                    os.write(answers, f"pid {child}\n".encode())
        except BaseException:  # noqa: BLE001 - the parent sees the pipe close and reports it
            code = 1
        finally:
            os._exit(code)

    def close(self) -> None:
        """End the zygote (it leaves when its requests pipe closes, killing any child still running)."""
        self._requests.close()
        os.close(self._answers)
        os.waitpid(self.pid, 0)

    def start(self, job: dict) -> Child:
        workdir = _workdir()
        try:
            self._requests.write(json.dumps({"job": job, "workdir": workdir}) + "\n")
        except BrokenPipeError:
            raise ZygoteGone("the screening worker's zygote process is gone") from None
        while (words := self._line())[0] != "pid":
            self._exit_of(words)
        pid = int(words[1])

        def wait(timeout: float) -> ChildExit:
            deadline, timed_out = time.monotonic() + max(0.0, timeout), False
            while pid not in self._exits:
                if not timed_out:
                    ready, _, _ = select.select([self._answers], [], [], max(0.0, deadline - time.monotonic()))
                    if not ready:
                        timed_out = True
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                        continue
                self._exit_of(self._line())
            raw = self._exits.pop(pid)
            return ChildExit(timed_out=True) if timed_out else _status(raw)
        return Child(pid, workdir, wait)
