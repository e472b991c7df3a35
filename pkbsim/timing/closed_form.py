"""The fast path: a plan's time from each flow's static bottleneck, and NCCL's rule of picking the
(algorithm, protocol) with the least estimated time.

Each flow gets min(its cap, min over its resources of capacity / flows on it); a phase lasts its latency plus
its slowest flow. For symmetric collectives every flow has the same bottleneck, so this equals the max-min
flow simulation exactly (the tests use it as the oracle); otherwise it is an upper bound on it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pkbsim.timing import nccl
from pkbsim.timing.plans import Plan, build_plan
from pkbsim.timing.routes import GB_PER_S, Router
from pkbsim.timing.topology import Topology


def phase_arrays(plan: Plan, router: Router):
    """Per phase: (latency µs, packed routes, wire bytes per flow, wire cap per flow in bytes/µs)."""
    for ph in plan.phases:
        routes = router.pack(ph.routes)
        wire = np.asarray(ph.payload, dtype=float) * plan.wire
        yield ph.latency_us, routes, wire, np.full(len(wire), ph.cap_GBps * plan.wire * GB_PER_S)


def plan_time_us(plan: Plan, router: Router) -> float:
    total = 0.0
    for lat, routes, wire, cap in phase_arrays(plan, router):
        total += lat
        if len(wire):
            counts = np.bincount(routes.ravel(), minlength=len(router.caps))
            share = np.minimum((router.caps / np.maximum(counts, 1))[routes].min(axis=1), cap)
            total += float(np.max(wire / share))
    return total


@dataclass
class Choice:
    plan: Plan
    time_us: float
    candidates: dict          # (algorithm, protocol) -> estimated µs


def choose(topo: Topology, router: Router, op: str, nbytes: int, ranks: list[int], algo: str | None = None,
           proto: str | None = None, ctas: int | None = None) -> Choice:
    """NCCL's selection: estimate every applicable (algorithm, protocol) and take the fastest.
    Raises ValueError (one line) when a forced algorithm or protocol cannot run here."""
    lay = nccl.layout(topo, ranks)
    algos = [algo] if algo else list(nccl.NCCL_ALGOS[op])
    candidates: dict = {}
    best: Choice | None = None
    reasons = []
    for a in algos:
        why = nccl.applicable(topo, op, a, lay)
        if why:
            reasons.append(f"{a}: {why}")
            continue
        protos = nccl.protocols_for(a, op)
        if proto and proto not in protos:
            reasons.append(f"{a} runs with {', '.join(protos)} only")
            continue
        for p in [proto] if proto else protos:
            plan = build_plan(topo, router, op, nbytes, ranks, a, p, ctas)
            t = plan_time_us(plan, router)
            candidates[(a, p)] = t
            if best is None or t < best.time_us:
                best = Choice(plan, t, candidates)
    if best is None:
        raise ValueError("; ".join(reasons) or f"no algorithm for {op}")
    return best

