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

    def __init__(self, pid: int, workdir: str, wait: Callable[[float], ChildExit], ended: Callable[[], bool]):
        self.pid, self.workdir, self._wait, self.ended = pid, workdir, wait, ended
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
    """A process forked once, before any job ran, that forks one child per candidate on request.

    Protocol on two pipes: the parent writes a job (one JSON line with its result path); the zygote answers
    the child's pid, then, once the child has ended, its raw wait status (one line each)."""

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
            self._serve(os.fdopen(to_z, "r"), os.fdopen(from_z, "w", buffering=1))
        os.close(to_z)
        os.close(from_z)
        self.pid = pid
        self._requests = os.fdopen(from_p, "w", buffering=1)
        self._answers = to_p  # read a byte at a time: a buffered reader would hide a line from select()

    def _answer(self) -> int:
        line = b""
        while not line.endswith(b"\n"):
            byte = os.read(self._answers, 1)
            if not byte:
                raise ZygoteGone("the screening worker's zygote process is gone")
            line += byte
        return int(line)

    @staticmethod
    def _serve(requests, answers) -> None:
        code = 0
        try:
            from pkbsim.screen.candidate_side import prepare
            from tasks.parallelkernelbench.naming import Checkout
            for line in requests:
                msg = json.loads(line)
                try:
                    # the task's code, never a candidate's: cached here for the next forks
                    prepare(Checkout.from_json(msg["job"].get("checkout")))
                except Exception:  # noqa: BLE001 - the child meets it again and reports it
                    pass
                child = os.fork()
                if child == 0:
                    requests.close()
                    answers.close()
                    _child(msg["job"], msg["workdir"])
                answers.write(f"{child}\n")
                _, raw = os.waitpid(child, 0)
                answers.write(f"{raw}\n")
        except BaseException:  # noqa: BLE001 - the parent sees the pipe close and reports it
            code = 1
        finally:
            os._exit(code)

    def close(self) -> None:
        """End the zygote (it leaves when its requests pipe closes)."""
        self._requests.close()
        os.close(self._answers)
        os.waitpid(self.pid, 0)

    def start(self, job: dict) -> Child:
        workdir = _workdir()
        try:
            self._requests.write(json.dumps({"job": job, "workdir": workdir}) + "\n")
        except BrokenPipeError:
            raise ZygoteGone("the screening worker's zygote process is gone") from None
        pid = self._answer()

        def wait(timeout: float) -> ChildExit:
            ready, _, _ = select.select([self._answers], [], [], max(0.0, timeout))
            timed_out = not ready
            if timed_out:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            raw = self._answer()
            return ChildExit(timed_out=True) if timed_out else _status(raw)

        def ended() -> bool:
            """Whether the child has ended (its status is waiting on the pipe, or the zygote is gone), without
            waiting or reading it."""
            return bool(select.select([self._answers], [], [], 0)[0])
        return Child(pid, workdir, wait, ended)
