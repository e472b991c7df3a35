"""Communicators and the operations posted on them, matched the way NCCL matches them.

Each rank posts operations into FIFO lanes (one lane per communicator for collectives and grouped
point-to-point, one per peer pair for ungrouped point-to-point, like PyTorch's NCCL backend). An operation
can only run when everything before it in its lane has completed; the operations of one group
(`batch_isend_irecv`, coalescing) run together. Collectives meet by per-communicator sequence number,
never by name or shape; sends and receives meet by per-direction order. Whoever makes the last move
(posts the last piece, or completes what blocked a lane) moves the data, under the world lock.
"""
from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import _disable_current_modes

from pkbsim.world.findings import Finding
from pkbsim.world.world import SimAbort, Wait, World


@dataclass(eq=False)
class Batch:
    """Operations issued in one group: they start together and complete together."""

    ops: list["Op"] = field(default_factory=list)


@dataclass(eq=False)
class Op:
    rank: int
    comm: "Comm"
    kind: str  # coll | send | recv
    desc: str
    site: str
    lane: deque
    batch: Batch | None = None
    done: bool = False
    # collectives
    seq: int = -1
    slot: "Slot | None" = None
    # point-to-point
    peer: int = -1
    tensor: torch.Tensor | None = None
    buffered: torch.Tensor | None = None
    clock: tuple = ()
    thread: int = 0  # the clock thread of the stream it was posted on: NCCL runs it there (pkbsim.world.clocks)

    def active(self) -> bool:
        """True when nothing earlier in its lane is still pending (its own group excepted)."""
        head = self.lane[0] if self.lane else None
        if head is None or head is self:
            return True
        return self.batch is not None and head.batch is self.batch

    def blocker(self) -> "Op | None":
        return None if self.active() else self.lane[0]


@dataclass(eq=False)
class Slot:
    """One collective of a communicator: the piece each group rank posted."""

    seq: int
    name: str
    signature: tuple
    execute: Callable[[list[Any]], None]
    ops: dict[int, Op] = field(default_factory=dict)
    args: dict[int, Any] = field(default_factory=dict)
    result: Any = None  # what execute returned, shared by every member


@dataclass(eq=False)
class Direction:
    sends: list[Op] = field(default_factory=list)
    recvs: list[Op] = field(default_factory=list)
    matched: int = 0


class Comm:
    """A communicator: the ranks of one process group, as NCCL sees them."""

    def __init__(self, world: World, name: str, ranks: list[int]):
        self.world, self.name, self.ranks = world, name, list(ranks)
        self.group_rank = {r: i for i, r in enumerate(self.ranks)}
        self.next_seq = {r: 0 for r in self.ranks}
        self.slots: dict[int, Slot] = {}
        self.lanes: dict[tuple, deque] = {}
        self.directions: dict[tuple[int, int], Direction] = {}
        self.devices: dict[int, tuple[int, int, str]] = {}  # rank -> (node, GPU index, first-use site)

    def __repr__(self) -> str:
        if self.name == self.world.world_comm_name:
            return "group WORLD"
        return f"group {self.name!r} (ranks {self.ranks})"

    def lane(self, rank: int, key) -> deque:
        return self.lanes.setdefault((rank, key), deque())


class Engine:
    """Posts operations, runs whatever became runnable, and explains what cannot run."""

    def __init__(self, world: World):
        self.world = world
        self.comms: dict[str, Comm] = {}

    def comm(self, name: str, ranks: list[int]) -> Comm:
        with self.world.lock:
            c = self.comms.get(name)
            if c is None:
                c = self.comms[name] = Comm(self.world, name, ranks)
                if self.world.world_comm_name is None:
                    self.world.world_comm_name = name
            return c

    # ---- posting ---------------------------------------------------------------------------------
    def post_collective(self, comm: Comm, rank: int, name: str, signature: tuple, args: Any,
                        execute: Callable[[list[Any]], None], desc: str, site: str,
                        batch: Batch | None = None) -> Op:
        w = self.world
        with w.lock:
            if w.failed:
                raise SimAbort(w._abort_message())
            seq = comm.next_seq[rank]
            comm.next_seq[rank] += 1
            lane = comm.lane(rank, "coll")
            op = Op(rank, comm, "coll", f"{desc} seq#{seq}", site, lane, batch, seq=seq, thread=w.clocks.thread(rank))
            if w.no_comm:
                op.done = True
                return op
            slot = comm.slots.get(seq)
            if slot is None:
                slot = comm.slots[seq] = Slot(seq, name, signature, execute)
            elif (slot.name, slot.signature) != (name, signature):
                first = next(iter(slot.ops.values()))
                msg = (f"collective mismatch on {comm} at seq #{seq}: rank {first.rank} called {first.desc} "
                       f"at {first.site}, rank {rank} called {desc} at {site}")
                w.fail(Finding("mismatch", msg, [first.rank, rank], [first.site, site],
                               [_stack_of(w, first.rank), _stack_of(w, rank)]))
                raise SimAbort(w._abort_message())
            op.slot = slot
            slot.ops[comm.group_rank[rank]] = op
            slot.args[comm.group_rank[rank]] = args
            lane.append(op)
            if batch is not None:
                batch.ops.append(op)
            self._run([op])
            return op

    def post_p2p(self, comm: Comm, rank: int, kind: str, peer: int, tensor: torch.Tensor, site: str,
                 batch: Batch | None = None) -> Op:
        w = self.world
        if w.no_comm:
            return Op(rank, comm, kind, f"{kind} to/from rank {peer}", site, deque(), done=True, thread=w.clocks.thread(rank))
        if w.lazy_p2p_init and batch is None:
            self._connect(comm, rank, peer, site)
        with w.lock:
            if w.failed:
                raise SimAbort(w._abort_message())
            key = "coll" if batch is not None else ("p2p", min(rank, peer), max(rank, peer))
            lane = comm.lane(rank, key)
            verb, prep = ("send", "to") if kind == "send" else ("recv", "from")
            d = comm.directions.setdefault((rank, peer) if kind == "send" else (peer, rank), Direction())
            mine = d.sends if kind == "send" else d.recvs
            desc = (f"{verb}({tuple(tensor.shape)}, {str(tensor.dtype).replace('torch.', '')}, {prep} rank {peer}) "
                    f"#{len(mine)}")
            op = Op(rank, comm, kind, desc, site, lane, batch, peer=peer, tensor=tensor,
                    clock=w.clocks.snapshot(rank) if kind == "send" and w.track_clocks else (),
                    thread=w.clocks.thread(rank))
            mine.append(op)
            lane.append(op)
            if batch is not None:
                batch.ops.append(op)
            self._run([op])
            return op

    def _connect(self, comm: Comm, rank: int, peer: int, site: str) -> None:
        """NCCL creates the communicator of an ungrouped pair on first use, collectively and blocking."""
        a, b = min(rank, peer), max(rank, peer)
        pair = self.comm(f"{comm.name}/p2p-{a}-{b}", [a, b])
        if pair.next_seq[rank] == 0:
            op = self.post_collective(pair, rank, "connect", (), None, lambda args: None,
                                      f"lazy creation of the p2p communicator of ranks {a},{b}", site)
            self.wait(rank, [op])

    # ---- progress --------------------------------------------------------------------------------
    def _run(self, work: list[Op]) -> None:
        """Run every operation that can now run; completing one may unblock the next in its lane."""
        w = self.world
        progressed = False
        while work:
            op = work.pop()
            if op.done or w.failed or not op.active():
                continue
            finished = self._try(op)
            for fin in finished:
                progressed = True
                fin.done = True
                lane = fin.lane
                if fin in lane:
                    lane.remove(fin)
                if lane:
                    work.append(lane[0])
                    if lane[0].batch is not None:
                        work.extend(o for o in lane[0].batch.ops if not o.done)
        if progressed:
            w.changed()

    def _try(self, op: Op) -> list[Op]:
        if op.kind == "coll":
            slot = op.slot
            members = op.comm.ranks
            if len(slot.ops) < len(members) or not all(o.active() for o in slot.ops.values()):
                # an inactive member will retry when its lane frees up
                return []
            if not any(o.done for o in slot.ops.values()):
                slot.result = slot.execute([slot.args[i] for i in range(len(members))])
                del op.comm.slots[slot.seq]
                if self.world.track_clocks:
                    self.world.clocks.join([o.thread for o in slot.ops.values()])
            return list(slot.ops.values())
        return self._try_p2p(op)

    def _try_p2p(self, op: Op) -> list[Op]:
        w = self.world
        comm = op.comm
        src, dst = (op.rank, op.peer) if op.kind == "send" else (op.peer, op.rank)
        d = comm.directions[(src, dst)]
        finished = []
        if op.kind == "send" and op.buffered is None and _nbytes(op.tensor) <= w.p2p_buffer:
            i = d.sends.index(op)
            if not (i < len(d.recvs) and d.recvs[i].active()):
                w.eager_sends += 1  # it completes only because it is buffered
            op.buffered = _snapshot(op.tensor)
            finished.append(op)
        while d.matched < min(len(d.sends), len(d.recvs)):
            s, r = d.sends[d.matched], d.recvs[d.matched]
            send_ready = s.buffered is not None or s.active()
            if not (send_ready and r.active()):
                break
            self._deliver(s, r)
            if s.clock:
                w.clocks.acquire_on(r.thread, s.clock)
            d.matched += 1
            if s.buffered is None:
                finished.append(s)
            finished.append(r)
        return finished

    def _deliver(self, s: Op, r: Op) -> None:
        src = s.buffered if s.buffered is not None else s.tensor
        dst = r.tensor
        if src.numel() != dst.numel() or src.dtype != dst.dtype:
            msg = (f"point-to-point mismatch on {s.comm}: rank {s.rank} {s.desc} at {s.site} was matched with "
                   f"rank {r.rank} {r.desc} at {r.site} (the n-th send meets the n-th receive of a pair)")
            self.world.fail(Finding("p2p_mismatch", msg, [s.rank, r.rank], [s.site, r.site]))
            return
        _copy(dst, src)

    # ---- waiting -----------------------------------------------------------------------------------
    def wait(self, rank: int, ops: list[Op]) -> None:
        """Block `rank` until all `ops` completed (the wait site is read off the thread if it deadlocks)."""
        pending = [o for o in ops if not o.done]
        if not pending:
            return
        kind = "send" if all(o.kind == "send" for o in pending) else "deadlock"

        def what() -> str:
            left = [o for o in pending if not o.done] or pending
            more = f" (+{len(left) - 1} more of its group)" if len(left) > 1 else ""
            return f"{left[0].desc} on {left[0].comm}{more}"
        self.world.block(rank, Wait(
            what=what,
            site=pending[0].site,
            ready=lambda: all(o.done for o in pending),
            waits_for=lambda: set().union(*(self._waits_for(o) for o in pending if not o.done)),
            explain=lambda: "; ".join(self._explain(o) for o in pending if not o.done),
            kind=kind,
        ))

    def _waits_for(self, op: Op) -> set[int]:
        blocker = op.blocker()
        if blocker is not None:
            return self._waits_for(blocker)
        if op.kind == "coll":
            posted = {o.rank for o in op.slot.ops.values() if o.active()}
            return set(op.comm.ranks) - posted
        return {op.peer}

    def _explain(self, op: Op) -> str:
        blocker = op.blocker()
        if blocker is not None:
            return f"queued behind {blocker.desc} at {blocker.site} on the same communicator"
        if op.kind == "coll":
            arrived = sorted(o.rank for o in op.slot.ops.values())
            missing = sorted(set(op.comm.ranks) - set(arrived))
            stuck = sorted(o.rank for o in op.slot.ops.values() if not o.active())
            parts = [f"arrived {len(arrived)}/{len(op.comm.ranks)}"]
            if missing:
                parts.append(f"missing ranks {missing}")
            if stuck:
                parts.append(f"ranks {stuck} posted it but are queued behind earlier operations")
            return ", ".join(parts)
        other = "receive" if op.kind == "send" else "send"
        d = op.comm.directions[(op.rank, op.peer) if op.kind == "send" else (op.peer, op.rank)]
        mine = (d.sends if op.kind == "send" else d.recvs).index(op)
        theirs = d.recvs if op.kind == "send" else d.sends
        if mine >= len(theirs):
            return f"rank {op.peer} has not posted the matching {other}"
        peer_op = theirs[mine]
        return f"the matching {other} on rank {op.peer} ({peer_op.site}) is queued behind {peer_op.blocker().desc}" \
            if peer_op.blocker() is not None else f"matching {other} posted at {peer_op.site}"


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def is_fake(t: torch.Tensor) -> bool:
    return t.device.type == "meta" or type(t).__name__ == "FakeTensor"


def resolve_comm(ctx, group) -> Comm:
    """A ProcessGroup, a group name or None (WORLD) -> the engine's communicator."""
    if group is None:
        group = dist.group.WORLD
    name = group if isinstance(group, str) else group.group_name
    comm = ctx.engine.comms.get(name)
    if comm is None:
        raise ValueError(f"unknown process group {name!r} for symmetric memory")
    return comm


def storage_key(t: torch.Tensor) -> int:
    """Identity of a tensor's memory: its storage address; in a shape run, where every fake storage is at
    address 0, the storage object itself (views made with set_ share it)."""
    try:
        st = t.untyped_storage()
        return st._cdata if is_fake(t) else st.data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(t)


def behind_the_program():
    """Context for data the simulator moves on a program's behalf: the rank's tracing modes must not see
    it and autograd must not record it. Free when neither is active (the common case)."""
    if not torch._C._len_torch_dispatch_stack() and not torch.is_grad_enabled():
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(_disable_current_modes())
    stack.enter_context(torch.no_grad())
    return stack


def _snapshot(t: torch.Tensor) -> torch.Tensor:
    if is_fake(t):
        return t
    with behind_the_program():
        return t.detach().clone()


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    if is_fake(dst) or is_fake(src):
        return
    with behind_the_program():
        dst.copy_(src.reshape(dst.shape))


def _stack_of(world, rank: int) -> str:
    """Where `rank` is, as the program's frames (innermost first; of a run of frames in one file, its innermost):
    a collective that a library issues names the library's line as its site; its callers name the program's."""
    import sys
    import threading

    from pkbsim.world.sites import user_stack

    th = world.ranks[rank].thread
    frame = sys._getframe(1) if th is threading.current_thread() else sys._current_frames().get(getattr(th, "ident", None))
    kept: list[str] = []   # the innermost frame, then one frame per file change: a library's run of frames is one
    for f in user_stack(frame, limit=40):
        if not kept or f.split(":")[0] != kept[-1].split(":")[0]:
            kept.append(f)
    return f"rank {rank} is at " + " <- ".join(kept[:5] or ["?"])
