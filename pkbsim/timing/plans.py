"""Collectives as flow plans: which GPU sends how many bytes to which GPU, per channel, in which phase.

A plan is what both engines evaluate: closed_form.py takes each flow's static bottleneck (the fast path and
the oracle), flowsim.py runs the same flows in the SimPy network. Sizes follow nccl-tests: `nbytes` is the
per-rank buffer for all_reduce/broadcast/reduce/sendrecv, the whole output for all_gather, the whole input
for reduce_scatter, and the whole send buffer for all_to_all.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from pkbsim.timing import nccl
from pkbsim.timing.routes import Router
from pkbsim.timing.topology import Topology

GIB_IN_GB = 2**30 / 1e9


@dataclass
class Phase:
    latency_us: float                      # paid before the phase's flows start
    routes: list = field(default_factory=list)
    payload: list = field(default_factory=list)   # bytes per flow
    cap_GBps: float = math.inf             # payload cap of each flow

    def add(self, route: tuple, nbytes: float) -> None:
        if route:   # a GPU's copy to itself loads no link
            self.routes.append(route)
            self.payload.append(nbytes)


@dataclass
class Plan:
    op: str
    algorithm: str
    protocol: str
    channels: int                          # CTAs per GPU the kernel occupies
    wire: float                            # wire bytes per payload byte
    ranks: list
    phases: list


def build_plan(topo: Topology, router: Router, op: str, nbytes: int, ranks: list[int], algo: str, proto: str,
               ctas: int | None = None) -> Plan:
    lay = nccl.layout(topo, ranks)
    nch = nccl.channels(topo, algo, proto, nbytes, lay)
    wire, cap = nccl.wire_and_cap(topo, op, algo, proto, lay, nch)
    lat = nccl.latency_us(topo, op, algo, proto, lay, nbytes, nch)
    if algo in nccl.PEER_KERNELS:
        phases, nch = _custom(topo, router, op, algo, nbytes, ranks, lat, ctas)
    else:
        phases = _BUILDERS[algo](topo, router, op, nbytes, ranks, nch, lat)
        for ph in phases:   # tree flows run up and down at once, so each direction gets half the channel cap
            ph.cap_GBps = cap / 2 if algo == "tree" else cap
    return Plan(op, algo, proto, nch, wire, list(ranks), phases)


def _by_node(topo: Topology, ranks: list[int]) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for g in ranks:
        groups.setdefault(topo.node_of(g), []).append(g)
    return list(groups.values())


def _rotate(members: list[int], k: int) -> list[int]:
    k %= len(members)
    return members[k:] + members[:k]


def _ring(topo, router, op, nbytes, ranks, nch, lat):
    n = len(ranks)
    share = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n}.get(op, 1.0)
    chain = op in ("broadcast", "reduce")   # pipelined chain from the root; no wrap-around edge
    ph = Phase(lat)
    groups = _by_node(topo, ranks)
    for c in range(nch):
        # across machines each channel enters every machine on a different GPU, so channels spread over NICs
        order = [g for grp in groups for g in (_rotate(grp, c) if len(groups) > 1 else grp)]
        nxt = order[1:] if chain else order[1:] + order[:1]
        for a, b in zip(order, nxt):
            ph.add(router.route(a, b), share * nbytes / nch)
    return [ph]


def _tree(topo, router, op, nbytes, ranks, nch, lat):
    """NCCL's tree all-reduce: a chain inside each machine and a double binary tree across machines, with
    reduce (up) and broadcast (down) pipelined at once; channels alternate between the two trees."""
    ph = Phase(lat)
    groups = _by_node(topo, ranks)
    for c in range(nch):
        heads = []
        for grp in groups:
            chain = _rotate(grp, c)
            heads.append(chain[0])
            for a, b in itertools.pairwise(chain):
                ph.add(router.route(a, b), nbytes / nch)
                ph.add(router.route(b, a), nbytes / nch)
        heads = heads if c % 2 == 0 else heads[::-1]
        for i in range(1, len(heads)):
            parent = heads[(i - 1) // 2]
            ph.add(router.route(heads[i], parent), nbytes / nch)
            ph.add(router.route(parent, heads[i]), nbytes / nch)
    return [ph]


def _nvls_bytes(topo, op, nbytes, n, nch, fill: bool = True) -> tuple[float, float]:
    """(egress, ingress) bytes per GPU through the switch. All-reduce moves S(n+1)/n each way
    (docs/sources.md#large-message-bandwidth). NCCL's pipeline adds one step of n x channels x 128 KiB chunks:
    the first step only reduces and the last only gathers (fill and drain). A fused multimem kernel reduces and
    stores each element at once: no fill."""
    step = n * nch * topo.nccl["nvls_chunk_bytes"] if fill else 0
    s = nbytes + min(nbytes, step)
    return {"all_reduce": (s * (n + 1) / n, s * (n + 1) / n),
            "all_gather": (s / n, s),
            "reduce_scatter": (s, s / n)}[op]


def _nvls(topo, router, op, nbytes, ranks, nch, lat, fill: bool = True):
    ph = Phase(lat)
    out, inn = _nvls_bytes(topo, op, nbytes, len(ranks), nch, fill)
    for g in ranks:
        egress, ingress = router.loop_route(g)
        for _ in range(nch):
            ph.add((egress,), out / nch)
            ph.add((ingress,), inn / nch)
    return [ph]


def _pat(topo, router, op, nbytes, ranks, nch, lat):
    """Bruck-style log2(n) exchanges: distance 2^k, min(2^k, n - 2^k) shards each; total (n-1)/n S."""
    n, phases, d = len(ranks), [], 1
    while d < n:
        ph = Phase(lat if not phases else 0.0)
        for i, g in enumerate(ranks):
            peer = ranks[(i + d) % n] if op == "all_gather" else ranks[(i - d) % n]
            for _ in range(nch):
                ph.add(router.route(g, peer), min(d, n - d) * nbytes / n / nch)
        phases.append(ph)
        d *= 2
    return phases


def _p2p(topo, router, op, nbytes, ranks, nch, lat):
    ph, n = Phase(lat), len(ranks)
    if op == "sendrecv":
        for i, g in enumerate(ranks):
            ph.add(router.route(g, ranks[(i + 1) % n]), nbytes)
    else:
        for a in ranks:
            for b in ranks:
                ph.add(router.route(a, b), nbytes / n)
    return [ph]


_BUILDERS = {"ring": _ring, "tree": _tree, "nvls": _nvls, "pat": _pat, "p2p": _p2p}


def kernel_GBps(topo: Topology, algo: str, ctas: int | None) -> tuple[float, int]:
    """A peer-memory kernel's bandwidth per GPU: min(CTAs x per-CTA bandwidth, peak), as NCCL's symmetric
    kernel model (sym_kernels.cc, docs/sources.md#nccl-cost-model); `ctas` defaults to just enough to reach the peak."""
    c = topo.nccl
    block = c["sym_block_GiBps"][0]
    peak = c["sym_peak_GiBps"][1 if algo == "nvls_custom" else 0]
    ctas = ctas or math.ceil(peak / block)
    return min(ctas * block, peak) * GIB_IN_GB, ctas


def _custom(topo, router, op, algo, nbytes, ranks, lat, ctas):
    """One-shot (every GPU reads all peers' buffers), two-shot (reduce-scatter then all-gather through peer
    loads and stores) and multimem (NVLS through symmetric memory) all-reduce; one-shot all-gather (every GPU
    copies each peer's shard, nbytes / n, at once). One base latency per kernel, as NCCL's symmetric-kernel
    model charges; the barrier between two-shot's halves is inside it."""
    bw, ctas = kernel_GBps(topo, algo, ctas)
    n = len(ranks)
    if op == "all_gather":
        ph = Phase(lat, cap_GBps=bw / (n - 1))
        for dst in ranks:
            for src in ranks:
                ph.add(router.route(src, dst), nbytes / n)
        return [ph], ctas
    if algo == "nvls_custom":
        ph = _nvls(topo, router, op, nbytes, ranks, ctas, lat, fill=False)[0]
        ph.cap_GBps = bw / ctas
        return [ph], ctas
    parts = [nbytes] if algo == "one_shot" else [nbytes / n, nbytes / n]
    phases = []
    for i, part in enumerate(parts):
        ph = Phase(lat if i == 0 else 0.0, cap_GBps=bw / (n - 1))
        for dst in ranks:
            for src in ranks:
                a, b = (src, dst) if i == 0 else (dst, src)   # pull shards, then push the reduced one
                ph.add(router.route(a, b), part)
        phases.append(ph)
    return phases, ctas
