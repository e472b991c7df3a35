"""Replay a recorded trace on a modelled machine: every rank's host issues kernels (paying the launch
overhead), every stream runs its kernels in order, and communication kernels meet their peers and move bytes
through the shared flow network, so overlapping traffic slows each other down.

Semantics modelled: streams are FIFO queues; events and wait_stream are dependency edges; collectives start
when every member's kernel has arrived (the early ones spin, as NCCL kernels do); send/recv pairs in order per
(group, sender, receiver), a batch being one kernel; signal puts land after one LL hop and satisfy the
matching waits in order; device_synchronize and value reads block the host; compute kernels take roofline
time, stretched while communication kernels hold SMs. Host time in the trace (t_us) is not used: it was
measured on the CPU simulator, not on the machine.
"""
from __future__ import annotations

import math
from collections import defaultdict, deque
from dataclasses import dataclass, field

import simpy

from pkbsim.timing.closed_form import choose
from pkbsim.timing.compute import local_copy_us, op_us
from pkbsim.timing.device_kernel import kernel_time, peer_read_cap_GBps
from pkbsim.timing.flowsim import run_plan
from pkbsim.timing.fused_matmul import pipeline
from pkbsim.timing.host_model import host_model
from pkbsim.timing.nccl import latency_us, layout
from pkbsim.timing.network import FlowNetwork
from pkbsim.timing.plans import kernel_GBps
from pkbsim.timing.predict import router_for
from pkbsim.timing.replay_result import ReplayResult, summarise
from pkbsim.timing.topology import Topology, nccl_constants
from pkbsim.timing.trace_ops import IN_PLACE, Collective, TraceError, actions, check_doc

LAUNCH_MODES = ("eager", "graph")


@dataclass(eq=False)
class Kernel:
    rank: int
    stream: int
    name: str
    kind: str
    site: str
    issue: float
    done: simpy.Event
    deps: list = field(default_factory=list)
    start: float = math.nan
    end: float = math.nan
    pred: Kernel | None = None      # what this kernel waited for last (the host's last wait if launch-bound)
    args: dict = field(default_factory=dict)


@dataclass
class Rendezvous:
    size: int
    arrived: list = field(default_factory=list)
    done: simpy.Event | None = None


class Replay:
    def __init__(self, topo: Topology, doc: dict, launch: str = "eager", calibration: str | None = None,
                 dtype: str | None = None):
        check_doc(doc)
        world = int(doc.get("world_size", len(doc["ranks"])))
        if world > topo.num_gpus:
            raise TraceError(f"the trace has {world} ranks but {topo.name} holds {topo.num_gpus} GPUs; "
                             f"pick a larger topology (pkb topo list) or --nodes")
        if launch not in LAUNCH_MODES:
            raise TraceError(f"unknown launch mode {launch!r}; use eager or graph")
        self.topo, self.doc, self.world = topo, doc, world
        self.model = host_model(calibration, topo)
        self.launch_us = self.model["launch"]["torch_eager_us" if launch == "eager" else "cuda_graph_us"]
        self.dtype = dtype or self.model["compute"]["default_dtype"]
        self.env = simpy.Environment()
        self.router = router_for(topo)
        self.net = FlowNetwork(self.env, self.router.caps, self.router.pad, record=True)
        self.notes: set[str] = set()
        self.kernels: list[Kernel] = []
        self.comm_sms = defaultdict(int)
        self._queues: dict = {}
        self._events: dict = {}
        self._colls: dict = {}
        self._p2p: dict = defaultdict(deque)
        self._pairs: dict = {}
        self._signals: dict = defaultdict(list)
        self._signal_count: dict = defaultdict(int)
        self._plans: dict = {}
        self._host_end: dict[int, float] = {}
        self._host_waited: dict[int, Kernel] = {}
        self._device_starts: dict = {}
        self._device_count: dict = defaultdict(int)

    # ---- host -----------------------------------------------------------------------------------------
    def run(self) -> ReplayResult:
        for r in self.doc["ranks"]:
            self.env.process(self._host(int(r["rank"]), actions(r["ops"], self.notes)))
        self.env.run()
        return summarise(self)

    def _host(self, rank: int, acts):
        last: dict[int, Kernel] = {}
        in_barrier = None
        for a in acts:
            if a.kind in ("sync", "host_sync"):
                pending = [k for s, k in last.items() if (a.kind == "sync" or s == a.stream) and not k.done.triggered]
                if pending:
                    yield self.env.all_of([k.done for k in pending])
                    self._host_waited[rank] = max(pending, key=lambda k: k.end)
                continue
            if a.kind in ("record", "wait_event", "wait_stream"):
                deps = []
                if a.kind == "wait_event" and (rank, a.op.get("event")) in self._events:
                    deps = [self._events[(rank, a.op.get("event"))]]
                if a.kind == "wait_stream":
                    other = int(a.op.get("other", 0))
                    last[other] = marker = self._enqueue(rank, other, "marker", a, [])
                    deps = [marker]
                last[a.stream] = k = self._enqueue(rank, a.stream, "marker", a, deps)
                if a.kind == "record":
                    self._events[(rank, a.op.get("event"))] = k
                continue
            barrier = a.op.get("barrier")   # the signals and waits of one symm barrier are one kernel launch
            if barrier is None or barrier != in_barrier:
                yield self.env.timeout(self.launch_us)
            in_barrier = barrier
            last[a.stream] = self._enqueue(rank, a.stream, a.kind, a, [])
        self._host_end[rank] = self.env.now

    def _enqueue(self, rank: int, stream: int, kind: str, action, deps: list) -> Kernel:
        k = Kernel(rank, stream, action.name, kind, action.op.get("site", ""), self.env.now, self.env.event(), deps)
        k.args["action"] = action
        k.pred = self._host_waited.get(rank)   # until the stream says otherwise: the host was the bottleneck
        self.kernels.append(k)
        key = (rank, stream)
        if key not in self._queues:
            self._queues[key] = simpy.Store(self.env)
            self.env.process(self._stream(self._queues[key]))
        self._queues[key].put(k)
        return k

    # ---- streams --------------------------------------------------------------------------------------
    def _stream(self, queue: simpy.Store):
        prev = None
        while True:
            k = yield queue.get()
            waits = [d.done for d in k.deps if not d.done.triggered]
            if waits:
                yield self.env.all_of(waits)
            candidates = [(d.end, d) for d in k.deps] + ([(prev.end, prev)] if prev else [])
            latest = max(candidates, key=lambda c: c[0], default=(-1.0, None))
            if latest[0] >= k.issue:
                k.pred = latest[1]
            k.start = self.env.now
            yield from self._execute(k)
            k.end = self.env.now
            k.done.succeed()
            prev = k

    def _execute(self, k: Kernel):
        a = k.args.pop("action")
        if k.kind == "marker":
            return
        if k.kind == "compute":
            yield from self._compute(k, a.op)
        elif k.kind == "collective":
            yield from self._collective(k, a)
        elif k.kind == "p2p":
            yield from self._p2p_kernel(k, a.p2p)
        elif k.kind == "signal_put":
            yield from self._signal_put(k, a.op)
        elif k.kind == "signal_wait":
            yield from self._signal_wait(k, a.op)

    # ---- kernels --------------------------------------------------------------------------------------
    def _compute(self, k: Kernel, op: dict):
        nbytes = op.get("bytes_read", 0) + op.get("bytes_written", 0)
        dev = op.get("device")
        k.args.update(flops=op.get("flops", 0), bytes=nbytes)
        if dev is None:
            dur = op_us(self.topo, op, self.dtype, self.model, self.comm_sms[k.rank])
        else:
            yield from self._peer_waits(k, dev)
            hop = self._remote_hop_us(k.rank, dev.get("waits_on", ()))
            t = kernel_time(self.topo, dev, self.model, hop, self.comm_sms[k.rank])
            dur = t.total_us
            k.args.update(bound=t.bound)
        waits = [self.env.timeout(dur)]
        peer = op.get("peer_bytes") or {}
        pairs = [(int(p), k.rank, b) for p, b in peer.get("read", {}).items()] + \
                [(k.rank, int(p), b) for p, b in peer.get("write", {}).items()]
        pairs = [(s, d, b) for s, d, b in pairs if s != d and b > 0]
        if pairs:
            bw, _ = kernel_GBps(self.topo, "one_shot", None)
            if dev is not None:   # a kernel's pulls are limited by the loads its blocks keep in flight
                bw = min(bw, peer_read_cap_GBps(self.topo, dev, 2 * self._remote_hop_us(k.rank, [p for p, *_ in pairs])))
            routes = self.router.pack([self.router.route(s, d) for s, d, _ in pairs])
            waits.append(self.net.start(routes, [b for *_, b in pairs], bw * 1e3 / len(pairs)))
            k.args["peer_bytes"] = sum(b for *_, b in pairs)
        began = self.env.now
        yield self.env.all_of(waits)
        if self.env.now > began + dur * (1 + 1e-9):
            k.args["bound"] = "link"   # its peer traffic (a device kernel's or a torch op's) outlasted its work

    def _device_start(self, rank: int, name: str, idx: int) -> simpy.Event:
        return self._device_starts.setdefault((rank, name, idx), self.env.event())

    def _peer_waits(self, k: Kernel, dev: dict):
        """A device kernel that spun on peers' flags waits until the same launch has started on each of them
        (the n-th launch of a kernel on one rank meets the n-th on the others): the predicted time of the
        writes it waited for, never the simulator's polls."""
        idx = self._device_count[(k.rank, k.name)]
        self._device_count[(k.rank, k.name)] += 1
        self._device_start(k.rank, k.name, idx).succeed(k)
        peers = [int(p) for p in dev.get("waits_on", ()) if int(p) != k.rank and int(p) < self.world]
        if not peers:
            return
        started = yield self.env.all_of([self._device_start(p, k.name, idx) for p in peers])
        last = max(started.values(), key=lambda x: x.start)
        if last.start > k.start:
            k.pred = last

    def _remote_hop_us(self, rank: int, peers) -> float:
        """One flag's trip to the farthest of `peers` (one LL hop, as a signal put)."""
        hops = [self.router.hop_class(rank, int(p)) for p in peers if int(p) != rank] or [self.topo.intra_link]
        lat = nccl_constants()["latency"]["hop"]
        return max(lat[h]["ring"][0] for h in hops)

    def _collective(self, k: Kernel, a):
        c = a.coll
        fused = None
        if a.matmul is not None:   # symm_mem's fused GEMM: its chunks overlap the communication
            fused = pipeline(self.topo, self.model, a.name, a.matmul, c.size, len(c.group), self.dtype,
                             self.comm_sms[k.rank])
            k.args.update(flops=a.matmul.get("flops", 0))
            yield self.env.timeout(fused.lead_us)
        key = (a.op["kind"], a.op.get("group"), a.op.get("seq"), a.name)
        rv = self._colls.setdefault(key, Rendezvous(len(c.group)))
        if rv.done is None:
            rv.done = self.env.event()
        rv.arrived.append(k)
        k.args.update(op=c.op, bytes=c.size, group=list(c.group))
        if len(rv.arrived) == rv.size:
            self.env.process(self._run_collective(rv, c, a.name in IN_PLACE))
        yield rv.done
        last = max(rv.arrived, key=lambda x: x.start)
        if last is not k:
            k.pred = last
        if fused is not None:
            k.args["bound"] = "compute" if fused.gemm_bound(k.start, self.env.now) else "link"
            yield self.env.timeout(fused.end(k.start, self.env.now) - self.env.now)

    def _run_collective(self, rv: Rendezvous, c: Collective, in_place: bool):
        group = c.group
        if len(group) == 1:   # one rank: an in-place op moves nothing, an out-of-place one copies
            yield self.env.timeout(0.0 if in_place else local_copy_us(self.topo, c.size))
        else:
            plan = self._plan(c)
            for g in group:
                self.comm_sms[g] += plan.channels
            for kk in rv.arrived:
                kk.args.update(algorithm=plan.algorithm, protocol=plan.protocol, channels=plan.channels)
            yield from run_plan(self.env, self.net, plan, self.router)
            for g in group:
                self.comm_sms[g] -= plan.channels
        rv.done.succeed()

    def _plan(self, c: Collective):
        if c not in self._plans:
            try:
                self._plans[c] = choose(self.topo, self.router, c.op, c.size, list(c.group), c.algo, c.proto).plan
            except ValueError as e:   # a peer-memory kernel this machine cannot run: fall back to NCCL's choice
                self.notes.add(f"{c.algo} {c.op} on ranks {list(c.group)[:4]}...: {e}; used NCCL's choice instead")
                self._plans[c] = choose(self.topo, self.router, c.op, c.size, list(c.group)).plan
        return self._plans[c]

    def _p2p_kernel(self, k: Kernel, ops: list[dict]):
        self.comm_sms[k.rank] += 1
        events = []
        for op in ops:
            send = op["op"] == "send"
            src, dst = (k.rank, int(op["peer"])) if send else (int(op["peer"]), k.rank)
            queue = self._p2p[(op.get("group"), src, dst)]
            if queue and queue[0][0] != send:
                _, event = queue.popleft()
                self._pairs[event].append(k)
                self.env.process(self._transfer(src, dst, int(op.get("bytes", 0)), event))
            else:
                event = self.env.event()
                self._pairs[event] = [k]
                queue.append((send, event))
            events.append(event)
        k.args["bytes"] = sum(int(op.get("bytes", 0)) for op in ops)
        yield self.env.all_of(events)
        self.comm_sms[k.rank] -= 1
        partners = [x for e in events for x in self._pairs.pop(e, ()) if x is not k and x.start > k.start]
        if partners:
            k.pred = max(partners, key=lambda x: x.start)

    def _transfer(self, src: int, dst: int, nbytes: int, event: simpy.Event):
        lay = layout(self.topo, [src, dst])
        yield self.env.timeout(latency_us(self.topo, "sendrecv", "p2p", "Simple", lay, nbytes, 1))
        route = self.router.route(src, dst)
        if route and nbytes:
            yield self.net.start(self.router.pack([route]), [nbytes])
        event.succeed()

    def _signal_key(self, op: dict, src: int, dst: int) -> tuple:
        return (op.get("group"), src, dst, op.get("channel", 0))

    def _signal_put(self, k: Kernel, op: dict):
        dst = int(op["peer"])
        key = self._signal_key(op, k.rank, dst)
        idx = self._signal_count[("put",) + key]
        self._signal_count[("put",) + key] += 1
        hop = self.router.hop_class(k.rank, dst) if dst != k.rank else self.topo.intra_link
        yield self.env.timeout(nccl_constants()["latency"]["hop"][hop]["ring"][0])   # one LL hop: a flagged store
        self._signal(key, idx).succeed(k)

    def _signal_wait(self, k: Kernel, op: dict):
        key = self._signal_key(op, int(op["peer"]), k.rank)
        idx = self._signal_count[("wait",) + key]
        self._signal_count[("wait",) + key] += 1
        put = yield self._signal(key, idx)
        if put.end > k.start or math.isnan(put.end):
            k.pred = put

    def _signal(self, key: tuple, idx: int) -> simpy.Event:
        events = self._signals[key]
        while len(events) <= idx:
            events.append(self.env.event())
        return events[idx]
