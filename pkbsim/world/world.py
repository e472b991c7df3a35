"""The simulated world: N rank threads, one lock, and the world-wide wait-for check.

Every blocking wait of a rank (a collective, a send, a signal pad) goes through `World.block`. A rank
that is about to sleep checks, under the lock, whether every live rank is blocked and none of their
conditions holds; if so the run is a deadlock and every rank is released with `SimAbort`. Nothing
sleeps without a timeout, so an abort from the watchdog or another rank's exception is always seen.
"""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pkbsim.world.clocks import VectorClocks
from pkbsim.world.findings import Finding, explains


class SimAbort(BaseException):
    """Raised in a rank thread when the world has failed; a BaseException so `except Exception` in
    the user's program cannot swallow it."""


@dataclass
class Wait:
    """What a blocked rank waits for. `ready` is evaluated under the world lock; `waits_for` names the
    ranks that could make it ready and `explain` says in words why it is not ready yet."""

    what: str | Callable[[], str]  # a callable is evaluated when a report is written
    site: str
    ready: Callable[[], bool]
    waits_for: Callable[[], set[int]] = lambda: set()
    explain: Callable[[], str] = lambda: ""
    kind: str = "deadlock"
    # called (under the lock) when the world is otherwise stuck: a wait that can still make progress on its
    # own (a kernel that can run another of its programs) makes itself ready and returns True
    escape: Callable[[], bool] | None = None

    def label(self) -> str:
        return self.what() if callable(self.what) else self.what


@dataclass
class RankState:
    rank: int
    cond: threading.Condition
    status: str = "running"  # running | blocked | done | failed | exited (os._exit: its thread is parked)
    wait: Wait | None = None
    exit_note: str | None = None  # how the rank left, when it left by an exit: "sys.exit(0) at x.py:8"
    last_op: str | None = None  # a finished rank's last communication: "all_reduce at train.py:305"
    thread: threading.Thread | None = None
    local: dict = field(default_factory=dict)


class World:
    def __init__(self, size: int, *, nproc_per_node: int | None = None, p2p_buffer: int = 0,
                 lazy_p2p_init: bool = False):
        if size < 1:
            raise ValueError("world size must be at least 1")
        self.size = size
        self.nproc_per_node = nproc_per_node or size
        self.p2p_buffer = p2p_buffer
        self.lazy_p2p_init = lazy_p2p_init
        self.clocks = VectorClocks(size)
        self.no_comm = False  # every operation completes at once and moves nothing (a "skip it" candidate)
        self.track_clocks = False  # switched on by the first symmetric allocation (races need it)
        self.lock = threading.RLock()
        self.ranks = [RankState(r, threading.Condition(self.lock)) for r in range(size)]
        self.findings: list[Finding] = []
        self.failed = False
        self.progress = 0  # bumped on every state change; the watchdog reads it
        self.eager_sends = 0  # sends that completed only because they were buffered
        self.blocked_sends_at_deadlock = 0
        self.world_comm_name: str | None = None  # the default group's communicator, created first
        self.excluded_s = 0.0  # time the watchdog does not count (building a program's CUDA extension)
        self.pauses = 0  # watchdog pauses in progress
        self.store = None  # the c10d store of the ranks' init_process_group (the launcher makes it)
        self.plugin_states: dict = {}  # plugins.WorldState -> that plug-in's state in this world
        self.exits: list[tuple[int, object, str]] = []  # the ranks' os._exit calls: (rank, status, site)
        self.exit_release = threading.Event()  # set when the run is over: parked os._exit threads unwind
        self.over = False  # the run's result is taken: a parked thread unwinding may not wait on anyone

    # ---- state changes -------------------------------------------------------------------------
    def changed(self) -> None:
        """Call under the lock after anything a wait may depend on has changed."""
        self.progress += 1
        for st in self.ranks:
            if st.status == "blocked" and st.wait is not None and st.wait.ready():
                st.cond.notify()

    def fail(self, finding: Finding, unless_failed: bool = False) -> None:
        """Record a fatal finding and release every rank. With unless_failed, a finding that arrives after
        the world already failed is dropped (it is a consequence of the first), unless it explains the
        failure better (a race behind a rank's failed check of the stale data it read)."""
        with self.lock:
            if unless_failed and self.failed and not explains(finding, self.findings):
                return
            self.findings.append(finding)
            if not self.failed:
                self.failed = True
                for st in self.ranks:
                    if st.status == "blocked" and st.wait is not None and st.rank not in finding.ranks:
                        finding.details.append(f"rank {st.rank}: released from {st.wait.label()} at {st.wait.site}")
                    st.cond.notify_all()

    @contextlib.contextmanager
    def watchdog_paused(self):
        """Time spent inside (e.g. compiling an extension) is not the program's run time."""
        t0 = time.perf_counter()
        with self.lock:
            self.pauses += 1
        try:
            yield
        finally:
            with self.lock:
                self.pauses -= 1
                self.excluded_s += time.perf_counter() - t0

    def add_finding(self, finding: Finding) -> None:
        with self.lock:
            self.findings.append(finding)

    def _abort_message(self) -> str:
        root = self.findings[0] if self.findings else None
        return f"simulated world aborted: {root.kind}: {root.message}" if root else "aborted"

    # ---- blocking ------------------------------------------------------------------------------
    def block(self, rank: int, wait: Wait) -> None:
        """Block rank until wait.ready(); raise SimAbort on deadlock or when the world fails."""
        st = self.ranks[rank]
        with self.lock:
            try:
                while True:
                    if self.failed or self.over:
                        raise SimAbort(self._abort_message())
                    if wait.ready():
                        return
                    st.status, st.wait = "blocked", wait
                    if self._everyone_stuck():
                        self._report_deadlock()
                        raise SimAbort(self._abort_message())
                    if not wait.ready():  # an escape (see Wait.escape) may have just made it ready
                        st.cond.wait(timeout=1.0)
            finally:
                st.status, st.wait = "running", None

    def finish(self, rank: int, status: str = "done", last_op: str | None = None) -> None:
        with self.lock:
            st = self.ranks[rank]
            st.status, st.wait, st.last_op = status, None, last_op
            self.progress += 1
            if not self.failed and self._everyone_stuck():
                self._report_deadlock()
            # a rank that finishes may be what the others were waiting for: let them re-check
            for other in self.ranks:
                other.cond.notify_all()

    def process_exit(self, rank: int, status, site: str) -> None:
        """A thread of the program called os._exit: on a GPU its process ends there. The rank counts as
        gone (its peers' waits on it can never complete); the caller parks the thread until the run is over."""
        with self.lock:
            self.exits.append((rank, status, site))
        self.ranks[rank].exit_note = f"os._exit({status!r}) at {site}"
        self.finish(rank, "exited")

    def _everyone_stuck(self) -> bool:
        blocked = []
        for st in self.ranks:
            if st.status == "running":
                return False
            if st.status == "blocked":
                blocked.append(st)
        if not blocked or any(st.wait.ready() for st in blocked):
            return False
        for st in blocked:
            if st.wait.escape is not None and st.wait.escape():
                st.cond.notify()
                return False
        return True

    # ---- reports -------------------------------------------------------------------------------
    def _report_deadlock(self) -> None:
        blocked = {st.rank: st.wait for st in self.ranks if st.status == "blocked"}
        details, sites = [], []
        for st in self.ranks:
            if st.rank in blocked:
                w = blocked[st.rank]
                why = w.explain()
                where = w.site
                waited = _waiting_site(st.thread)
                if waited and waited != where:
                    where += f" (waited at {waited})"
                details.append(f"rank {st.rank}: blocked in {w.label()} at {where}" + (f" -- {why}" if why else ""))
                sites.append(w.site)
            else:
                state = f"left by {st.exit_note}" if st.exit_note else "finished" if st.status == "done" else st.status
                if state == "finished":
                    state += f" (its last communication: {st.last_op})" if st.last_op else " (no communication)"
                details.append(f"rank {st.rank}: {state}")
        cycle = find_cycle({r: w.waits_for() for r, w in blocked.items()})
        if cycle:
            details.append("cycle: " + " -> ".join(f"rank {r}" for r in cycle + [cycle[0]]))
        else:
            gone = sorted({p for w in blocked.values() for p in w.waits_for()} - set(blocked))
            if gone:
                notes = [f"rank {r} left by {self.ranks[r].exit_note}" for r in gone if self.ranks[r].exit_note]
                details.append("waiting for ranks that will never arrive: " + ", ".join(map(str, gone))
                               + (f" ({'; '.join(notes)})" if notes else ""))
        kinds = {w.kind for w in blocked.values()}
        kind = "protocol" if kinds == {"protocol"} else "deadlock"
        self.blocked_sends_at_deadlock = sum(1 for w in blocked.values() if w.kind == "send")
        msg = f"{len(blocked)} of {self.size} ranks are blocked and none can proceed"
        self.findings.append(Finding(kind, msg, sorted(blocked), sites, details))
        self.failed = True
        for st in self.ranks:
            st.cond.notify_all()


def _waiting_site(thread) -> str | None:
    """The user's line where a blocked rank thread is waiting now."""
    import sys

    from pkbsim.world.sites import user_stack

    frame = sys._current_frames().get(thread.ident) if thread is not None else None
    stack = user_stack(frame, limit=1) if frame is not None else []
    return stack[0].split(" in ")[0] if stack else None


def find_cycle(edges: dict[int, set[int]]) -> list[int]:
    """A cycle in the wait-for graph among blocked ranks, as a list of ranks (empty if none)."""
    color: dict[int, int] = {}
    stack: list[int] = []

    def visit(u: int) -> list[int]:
        color[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if v not in edges:
                continue
            if color.get(v) == 1:
                return stack[stack.index(v):]
            if v not in color:
                found = visit(v)
                if found:
                    return found
        color[u] = 2
        stack.pop()
        return []

    for u in sorted(edges):
        if u not in color:
            found = visit(u)
            if found:
                return found
    return []
