"""One scoring job: torchrun with N rank workers in a session of their own, driven over a socket,
killed as a whole when it ends or overruns; processes that escaped the session are found (the
scorer is their subreaper) and killed too, and reported.
"""
from __future__ import annotations

import ctypes
import functools
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

import candidate_sandbox as sandbox
from hwbackend import saved
from hwbackend.failures import cuda_error_line
from hwbackend.job_spec import JobSpec
from hwbackend.protocol import Channel, unix_call
from hwbackend.result import FailureKind
from tasks.parallelkernelbench.checkout import checkout_of

PR_SET_CHILD_SUBREAPER = 36
MAX_NAMED = 8  # ranks whose last status a timeout's message quotes (the details quote every rank)
WATCH_INTERVAL = 0.5  # seconds between looks at the job's health while waiting for the ranks
LAUNCHER_REPORT_S = 10.0  # how long a rank's unexplained death waits for torchrun to end and say why
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# variables the machine requires for every GPU program (NVLink multicast off), passed through untouched
PASS_THROUGH = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH",
                "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


_PEER_FAILURE = ("Connection closed", "Connection reset", "Broken pipe", "NCCL communicator was aborted",
                 "remote process exited", "Timed out")


class JobFailure(Exception):
    def __init__(self, kind: FailureKind, message: str, rank: int | None = None, details: str = ""):
        super().__init__(message)
        self.kind, self.message, self.rank, self.details = kind, message, rank, details


def become_subreaper() -> None:
    """Orphans of our jobs are re-parented to this process instead of init, so none can hide."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) of every live process in view."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    table[int(entry)] = (int(fields[1]), int(fields[3]))
            except (OSError, IndexError, ValueError):
                continue
    return table


def _children() -> list[int]:
    me = os.getpid()
    return [pid for pid, (parent, _) in _processes().items() if parent == me]


def _child_map(table: dict[int, tuple[int, int]]) -> dict[int, list[int]]:
    """parent pid -> its children's pids, from `_processes()`."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    return children


def _escaped_within(root: int) -> list[int]:
    """Processes the ranks started in a session of their own (the job's launcher `root` leads the job's
    session; torchrun gives each rank a session of its own, and what a rank runs stays in it). Inside the
    sandbox such a process is reparented to the sandbox's init, not to this scorer, and dies with it: it is
    found here, while the job still runs."""
    table = _processes()
    if root not in table:
        return []
    children = _child_map(table)
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        for pid in children.get(parent, ()):
            frontier.append(pid)
            if table[pid][1] != table[parent][1] != root:  # own session, started from a rank's
                found.append(pid)
    return found


def _tree(root: int) -> list[int]:
    """`root` and every live process below it (inside a sandbox, whatever its ranks start stays below it)."""
    table = _processes()
    children = _child_map(table)
    found, frontier = [], [root] if root in table else []
    while frontier:
        pid = frontier.pop()
        found.append(pid)
        frontier += children.get(pid, [])
    return found


def _thread_stats(pid: int, name: str):
    """The text of /proc/PID/task/TID/`name` for each thread of `pid` (none where the process is gone)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/{name}") as f:
                yield f.read()
        except OSError:
            continue


def _all_stopped(pids: list[int]) -> bool:
    """Whether every thread of these processes is stopped (or gone)."""
    return all(text.rsplit(")", 1)[1].split()[0] in "TtZX" for pid in pids for text in _thread_stats(pid, "stat"))


def _run_ns(pids: list[int]) -> dict[int, int]:
    """pid -> nanoseconds its threads have run (the kernel's schedstat, summed over threads)."""
    return {pid: sum(int(text.split()[0]) for text in _thread_stats(pid, "schedstat")) for pid in pids}


def _session_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def _let_session_die(sid: int, limit: float = 5.0) -> None:
    """Wait (briefly) until the job's own processes, just sent SIGKILL, are gone: on a loaded machine a
    rank can take a while to die, and must not be mistaken for a process that escaped the session."""
    deadline = time.monotonic() + limit
    time.sleep(0.05)
    while time.monotonic() < deadline and any(_session_of(pid) == sid for pid in _children()):
        time.sleep(0.05)


class Job:
    launchers: set[int] = set()  # the launchers of this process's live jobs: the two of a launch can be alive at once

    def __init__(self, spec: JobSpec):
        self.spec = spec
        self.dir = tempfile.mkdtemp(prefix=f"pkb-{spec.role}-")
        self.out_dir = os.path.join(self.dir, "out")
        self.status_dir = os.path.join(self.dir, "status")
        for d in (self.out_dir, self.status_dir, os.path.join(self.dir, "tmp")):
            os.makedirs(d)
        self.channels: list[Channel] = []
        self.ranked = False  # the channels are in rank order (identify_ranks)
        self.proc: subprocess.Popen | None = None
        self.log = None
        self.sandboxed = False
        self.deadline = 0.0
        self.stopped: list[int] = []  # processes `pause` stopped
        self.stopped_ns: dict[int, int] = {}  # and how long each had run when they were all stopped
        self.paused_at = 0.0
        self.leftovers = 0
        self.world_size = spec.nproc
        self.limits = sandbox.Limits.for_timeout(spec.timeout).effective()  # CPU time per process, processes+threads

    def _env(self, sock_path: str) -> dict:
        env = {k: os.environ[k] for k in PASS_THROUGH if k in os.environ}
        tmp = os.path.join(self.dir, "tmp")
        env.update(HOME=self.dir, TMPDIR=tmp, TORCH_EXTENSIONS_DIR=os.path.join(self.dir, "torch_extensions"),
                   TRITON_CACHE_DIR=os.path.join(self.dir, "triton"), PYTHONPATH=REPO_ROOT, PYTHONUNBUFFERED="1",
                   PKB_CONTROL=sock_path, PKB_ROLE=self.spec.role, PKB_TASK=self.spec.task,
                   PKB_BACKEND=self.spec.backend, PKB_PRESET=self.spec.preset, PKB_OUT=self.out_dir,
                   PKB_STATUS=self.status_dir, OMP_NUM_THREADS="1")
        if self.spec.candidate:
            env["PKB_CANDIDATE"] = os.path.abspath(self.spec.candidate)
        checkout = checkout_of(self.spec.task)
        if checkout:  # a ParallelKernelBench problem: each rank loads it from the same checkout
            env.update(PKB_CHECKOUT=checkout.root, PKB_CHECKOUT_DTYPE=checkout.dtype)
        return env

    def start(self) -> None:
        sock_path = os.path.join(self.dir, "ctl.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix_call(listener, sock_path, "bind")
        listener.listen(self.spec.nproc)
        self.launch(sock_path)
        self.accept_ranks(listener)

    def launcher_args(self) -> list[str]:
        """How torchrun forms the world: this machine alone (a job across nodes overrides it)."""
        return ["--standalone", f"--nproc-per-node={self.spec.nproc}"]

    def launch(self, control: str) -> None:
        """Start torchrun in a session of its own; its workers will connect to `control`."""
        cmd = [sys.executable, "-m", "torch.distributed.run", *self.launcher_args(), "--max-restarts=0",
               "-m", "hwbackend.worker"]
        if sandbox.wanted():
            # every rank of this node in one sandbox, the job folder (its control socket, outputs, HOME and
            # TMPDIR) writable; on one node with a loopback of its own for torchrun and NCCL/gloo, across
            # nodes (control over TCP) with the machine's network, which the ranks need to reach the others
            sandbox.check()
            readable = [os.path.dirname(os.path.abspath(self.spec.candidate))] if self.spec.candidate else []
            checkout = checkout_of(self.spec.task)
            readable += [checkout.root] if checkout else []
            cmd = [*sandbox.prefix([self.dir], [*readable, REPO_ROOT], self.limits,
                                   network=control.startswith("tcp://"), cwd=self.dir), *cmd]
            self.sandboxed = True
        self.log = open(os.path.join(self.dir, "job.log"), "wb")
        self.proc = subprocess.Popen(cmd, env=self._env(control), cwd=self.dir, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=functools.partial(_limits, self.limits.cpu_seconds))
        Job.launchers.add(self.proc.pid)
        self.deadline = time.monotonic() + self.spec.timeout

    def accept_ranks(self, listener: socket.socket) -> None:
        """Take one connection per rank of the world, or fail when the launcher dies or time runs out."""
        try:
            while len(self.channels) < self.world_size:
                listener.settimeout(max(0.05, self._left()))
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    self.check_launcher()
                    if self._left() <= 0:
                        raise JobFailure(FailureKind.TIMEOUT, "the ranks did not start within the timeout",
                                         details=self.last_ops()) from None
                    continue
                ch = self.admit(conn)
                if ch is not None:
                    self.channels.append(ch)
        finally:
            listener.close()
        self.identify_ranks()

    def identify_ranks(self) -> None:
        """Put the channels in rank order: each worker names its rank in its first line, sent before the
        candidate is imported (so a candidate cannot claim a peer's rank to be sent the peer's seeds)."""
        hellos = self.gather(expect="hello")
        ranks = [h.get("rank") for h in hellos]
        if sorted(r for r in ranks if isinstance(r, int)) != list(range(self.world_size)):
            raise JobFailure(FailureKind.ERROR, f"the ranks named themselves {ranks}, not 0..{self.world_size - 1}")
        self.channels = [ch for _, ch in sorted(zip(ranks, self.channels), key=lambda p: p[0])]
        self.ranked = True

    def admit(self, conn: socket.socket) -> Channel | None:
        """The channel of a connecting rank (a Unix socket in the job's private folder needs no check)."""
        return Channel(conn)

    def launcher_exit(self) -> int | None:
        """torchrun's exit status (negative: killed by that signal), None while it runs. Inside the sandbox
        the supervisor passes on a death by signal N as status 128 + N (as a shell does)."""
        code = self.proc.poll()
        if code is not None and self.sandboxed and code > 128:
            return 128 - code
        return code

    def check_launcher(self) -> None:
        if self.launcher_exit() is not None:
            capped = self._capped()
            if capped:
                raise capped
            raise JobFailure(FailureKind.ERROR, f"torchrun exited with status {self.launcher_exit()} before "
                             f"all ranks connected", details=self.log_tail())

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def send_all(self, **msg) -> None:
        for ch in self.channels:
            ch.send(**msg)

    def send_each(self, message) -> None:
        """To each rank its own message: `message(rank)` (the channels are in rank order)."""
        for rank, ch in enumerate(self.channels):
            ch.send(**message(rank))

    def gather(self, expect: str = "done") -> list[dict]:
        """One reply from every rank; a rank's error or the deadline ends the job."""
        replies: list[dict | None] = [None] * len(self.channels)
        for i, ch in enumerate(self.channels):
            while replies[i] is None:
                try:
                    self._await(ch)
                except JobFailure as failure:
                    if failure.kind is FailureKind.TIMEOUT:
                        raise self._timeout(replies) from None
                    raise
                ch.sock.settimeout(max(0.01, self._left()))
                try:
                    msg = ch.recv()
                except TimeoutError:
                    raise self._timeout(replies) from None
                except (ConnectionError, OSError):
                    raise self._died() from None
                if msg.get("event") == "error":
                    raise self._root_cause(msg, ch)
                replies[i] = msg
        return replies

    def _timeout(self, replies: list) -> JobFailure:
        """The job ran out of time waiting for `replies`: which ranks answered, and what each of the others
        last reported doing (its status file; the first MAX_NAMED ranks in the message, all in the details)."""
        status = self.rank_status()
        silent = [r for r, reply in enumerate(replies) if reply is None]
        if not self.ranked:  # the channels are not in rank order yet: which rank is silent is not known
            silent = list(range(len(replies)))
        said = [f"rank {r}: {status.get(r, 'no status reported')}" for r in silent[:MAX_NAMED]]
        more = f"; and {len(silent) - MAX_NAMED} more rank(s)" if len(silent) > MAX_NAMED else ""
        answered = len(replies) - len(silent)
        return JobFailure(FailureKind.TIMEOUT, f"no answer within {self.spec.timeout:g} s from {len(silent)} of "
                          f"{len(replies)} rank(s) ({answered} answered); " + "; ".join(said) + more,
                          details=self.last_ops())

    def _died(self) -> JobFailure:
        """A rank's connection closed without a report: its log may still say why (NCCL's watchdog aborts
        the process on an asynchronous CUDA error before the worker can send it). A rank killed by a signal
        (the kernel's CPU-time backstop: SIGXCPU) is named only in torchrun's summary, written once it has
        ended the other ranks: wait for it (a bounded time) before calling the death unexplained."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=max(0.0, min(LAUNCHER_REPORT_S, self._left())))
            except subprocess.TimeoutExpired:
                pass
        capped = self._capped()
        if capped:
            return capped
        line = cuda_error_line(self.log_text())
        if line is not None:
            return JobFailure(FailureKind.CUDA_ERROR, f"a rank died on a CUDA error: {line}", details=self.log_tail())
        return JobFailure(FailureKind.ERROR, "a rank died without reporting", details=self.log_tail())

    def _capped(self) -> JobFailure | None:
        """The job's end when a cap of the sandbox (or, unsandboxed, the kernel's CPU-time limit) ended it."""
        log = self.log_text()
        line = sandbox.breach(log)
        if line is None and "SIGXCPU" in log:
            where = "the sandbox's cap" if self.sandboxed else "the limit"
            line = (f"a rank's process was ended by the kernel (SIGXCPU) for its CPU time, over {where} of "
                    f"{self.limits.cpu_seconds:g} s per process")
        return JobFailure(FailureKind.RESOURCE_LIMIT, line, details=self.log_tail()) if line else None

    def _await(self, ch: Channel) -> None:
        """Block until `ch` has something to read; between looks, watch() may end the job early."""
        while not select.select([ch.sock], [], [], max(0.0, min(WATCH_INTERVAL, self._left())))[0]:
            if self._left() <= 0:
                raise JobFailure(FailureKind.TIMEOUT, f"no answer within {self.spec.timeout:g} s",
                                 details=self.last_ops())
            self.watch()

    def watch(self) -> None:
        """Called while waiting for the ranks: nothing to watch on one node (a job across nodes watches them)."""

    def _root_cause(self, first: dict, source: Channel) -> JobFailure:
        """When one rank fails its peers fail too ("connection closed"); report the rank that failed first
        in its own right: wait briefly for the others' reports and prefer an error that is not a peer's.
        If every report is a peer's and a rank's channel closed without one, that rank died (`_died`)."""
        capped = self._capped()
        if capped:
            return capped
        errors, silent = [first], False
        for ch in self.channels:
            ch.sock.settimeout(1.0)
            try:
                while True:
                    msg = ch.recv()
                    if msg.get("event") == "error":
                        errors.append(msg)
                        break
            except ConnectionError:
                silent |= ch is not source
            except (OSError, ValueError):
                continue
        own = [e for e in errors if not any(p in e["message"] for p in _PEER_FAILURE)]
        if not own and silent:
            return self._died()
        e = (own or errors)[0]
        return JobFailure(FailureKind(e["kind"]), e["message"], e.get("rank"), e.get("traceback", ""))

    def rank_status(self) -> dict[int, str]:
        """What each rank of this machine last said it was doing (its status file)."""
        status = {}
        try:
            folder = saved.open_folder(self.status_dir)
        except saved.SavedFileProblem:
            return status
        try:
            for r in range(self.world_size):  # the candidate can write these: read as carefully as its outputs
                try:
                    data = saved.read_bytes(folder, f"rank{r}", 4096, time.monotonic() + 1.0)
                except (OSError, saved.SavedFileProblem):
                    continue
                status[r] = data.rstrip(b"\0").decode(errors="replace")
        finally:
            os.close(folder)
        return status

    def last_ops(self) -> str:
        status = self.rank_status()
        return "\n".join(f"rank {r}: {status.get(r, 'not started')}" for r in range(self.world_size))

    def log_text(self) -> str:
        try:
            if self.log:
                self.log.flush()
            with open(os.path.join(self.dir, "job.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 2000) -> str:
        return self.log_text()[-n:]

    def pause(self) -> None:
        """Stop every process of the job, from outside its sandbox (SIGSTOP cannot be caught), until `resume`:
        while the other job of a launch runs a timed batch, this one can run nothing on the host beside it
        (and what it had queued on a device was synchronised at the end of its own batch)."""
        self.stopped, self.paused_at = [], time.monotonic()
        if self.proc is None:
            return
        for _ in range(4):  # a process forked while the others were being stopped is caught by the next pass
            new = [pid for pid in _tree(self.proc.pid) if pid not in self.stopped]
            if not new:
                break
            for pid in new:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    self.stopped.append(pid)
                except ProcessLookupError:
                    pass
        settle = time.monotonic() + 0.25  # a thread inside a system call stops when it returns
        while not _all_stopped(self.stopped) and time.monotonic() < settle:
            time.sleep(0.0005)
        self.stopped_ns = _run_ns(self.stopped)

    def ran_while_stopped(self) -> float:
        """Seconds of CPU the paused job's processes ran since `pause` settled, new processes' whole time
        included: none, unless something restarted them (the kernel sends SIGCONT to a process group it
        orphans while members are stopped) or a thread did not stop (a long system call). Read before
        `resume`."""
        if self.proc is None or not self.stopped:
            return 0.0
        now = _run_ns(_tree(self.proc.pid))
        return sum(max(0, ns - self.stopped_ns.get(pid, 0)) for pid, ns in now.items()) / 1e9

    def resume(self) -> None:
        """Continue what `pause` stopped; the time it was stopped is not the job's (its deadline moves on)."""
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if self.stopped:
            self.deadline += time.monotonic() - self.paused_at
        self.stopped = []

    def finish(self) -> None:
        """End the job: ask the ranks to leave, then kill whatever is left, escapees included."""
        self.resume()
        escaped = _escaped_within(self.proc.pid) if self.proc is not None else []
        try:
            self.send_all(phase="bye")
        except OSError:
            pass
        for ch in self.channels:
            ch.close()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=max(0.5, min(10.0, self._left())))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            Job.launchers.discard(self.proc.pid)
            _let_session_die(self.proc.pid)
        strays = [pid for pid in _children() if pid not in Job.launchers]  # another live job's is not this one's
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.leftovers = len(set(strays) | set(escaped))
        if self.log:
            self.log.close()


def _limits(cpu_seconds: float) -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dumps of candidate memory
    # the kernel's cap on CPU time per process: above the sandbox's own (whose supervisor names a breach
    # first), and the only one under --no-sandbox, where a breach is named from the log's SIGXCPU
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_seconds) + 5, int(cpu_seconds) + 10))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 65536), min(hard, 65536)))
