"""The simulated timeline as Chrome/Perfetto trace JSON: one process per rank with a track per stream, and a
`links` process with a bandwidth counter per link (the busiest ones), in µs as the format expects."""
from __future__ import annotations

import json
import math

import numpy as np

MAX_LINK_TRACKS = 64


def trace_events(result) -> list[dict]:
    rp = result.replay
    critical = {(c["rank"], c["stream"], c["start_us"], c["name"]) for c in result.critical_path}
    events: list[dict] = []
    for r in sorted({k.rank for k in rp.kernels}):
        events.append({"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r} (GPU {r})"}})
    for rank, stream in sorted({(k.rank, k.stream) for k in rp.kernels}):
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": stream,
                       "args": {"name": f"stream {stream}"}})
    for k in rp.kernels:
        if k.kind == "marker" or math.isnan(k.end):
            continue
        args = {key: v for key, v in k.args.items() if isinstance(v, (int, float, str, list))}
        args["site"] = k.site
        if (k.rank, k.stream, k.start, k.name) in critical:
            args["critical_path"] = True
        events.append({"ph": "X", "name": k.name, "cat": k.kind, "pid": k.rank, "tid": k.stream, "ts": k.start,
                       "dur": k.end - k.start, "args": args})
    events += _link_counters(rp, result.makespan_us)
    return events


def _link_counters(rp, makespan: float) -> list[dict]:
    router, net = rp.router, rp.net
    busiest = np.argsort(-net.carried[:router.pad])[:MAX_LINK_TRACKS]
    keep = {int(i) for i in busiest if net.carried[i] > 0}
    if not keep:
        return []
    pid = max(k.rank for k in rp.kernels) + 1
    events = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "links (GB/s)"}}]
    current: dict[int, float] = {}
    for t, resources, load in net.timeline:
        now = {int(r): float(v) / 1e3 for r, v in zip(resources, load) if int(r) in keep}
        for r in set(current) | set(now):
            if current.get(r, 0.0) != now.get(r, 0.0):
                events.append({"ph": "C", "name": router.names[r], "pid": pid, "ts": t,
                               "args": {"GB/s": now.get(r, 0.0)}})
        current = now
    events += [{"ph": "C", "name": router.names[r], "pid": pid, "ts": makespan, "args": {"GB/s": 0.0}}
               for r in current]
    return events


def write(path: str, result) -> None:
    with open(path, "w") as f:
        json.dump({"traceEvents": trace_events(result), "displayTimeUnit": "ns",
                   "otherData": {"topology": result.topology, "makespan_us": result.makespan_us}}, f)
