"""Cross-communicator order: collectives of two communicators issued in opposite orders on two ranks.

Each communicator matches its own collectives by issue order, so the run can complete on the simulator
(and on GPUs, sometimes); but NCCL kernels of different communicators can block each other on a GPU
(a kernel spinning for a peer holds the SMs or the stream the other needs), so opposite orders are a
hang waiting to happen (NVIDIA/nccl#217, #195). Checked on the trace after a run.
"""
from __future__ import annotations

from pkbsim.world.findings import Finding
from pkbsim.world.trace import RankTrace


def _sequence(trace: RankTrace) -> list[tuple[str, int, str]]:
    return [(r["group"], r["seq"], r["site"]) for r in trace.records
            if r["kind"] in ("collective", "symm") and "seq" in r and "group" in r]


def cross_comm_order(traces: list[RankTrace], group_label=str) -> Finding | None:
    seqs = [_sequence(t) for t in traces]
    positions = [{(g, s): i for i, (g, s, _) in enumerate(seq)} for seq in seqs]
    for a in range(len(traces)):
        for b in range(a + 1, len(traces)):
            shared = [k for k in ((g, s) for g, s, _ in seqs[b]) if k in positions[a]]
            last = None
            for key in shared:
                if last is not None and positions[a][key] < positions[a][last] and key[0] != last[0]:
                    site_a1, site_a2 = seqs[a][positions[a][key]][2], seqs[a][positions[a][last]][2]
                    site_b1, site_b2 = seqs[b][positions[b][last]][2], seqs[b][positions[b][key]][2]
                    x, y = f"{group_label(key[0])} #{key[1]}", f"{group_label(last[0])} #{last[1]}"
                    msg = (f"ranks {a} and {b} issue collectives of two communicators in opposite orders: rank {a} "
                           f"issues {x} ({site_a1}) before {y} ({site_a2}), rank {b} issues {y} ({site_b1}) before "
                           f"{x} ({site_b2}); NCCL kernels of different communicators can block each other on the "
                           f"GPU: issue them in the same order on every rank")
                    return Finding("order_hazard", msg, [a, b], [site_a1, site_b1])
                if last is None or positions[a][key] > positions[a][last]:
                    last = key
    return None
