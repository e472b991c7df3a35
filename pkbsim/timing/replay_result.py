"""What a replay reports: time per rank, the critical path, and how busy each link was."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class ReplayResult:
    topology: str
    world_size: int
    makespan_us: float
    ranks: list            # per rank: end, compute and communication busy time, kernel count
    critical_path: list    # kernels from the first to the one that ends last
    links: list            # used resources by utilisation (bytes / (capacity x makespan))
    notes: list
    unfinished: list       # kernels that never completed (a peer never issued the matching op)
    replay: object         # the Replay, for the Chrome trace writer

    def to_json(self) -> dict:
        return {"topology": self.topology, "world_size": self.world_size, "makespan_us": self.makespan_us,
                "ranks": self.ranks, "critical_path": self.critical_path, "links": self.links,
                "notes": self.notes, "unfinished": self.unfinished}


COMM = ("collective", "p2p", "signal_put", "signal_wait")


def describe(k) -> dict:
    return {"rank": k.rank, "stream": k.stream, "name": k.name, "kind": k.kind, "site": k.site,
            "start_us": k.start, "end_us": k.end,
            **{key: v for key, v in k.args.items() if key in ("op", "bytes", "algorithm", "protocol", "bound")}}


def critical_path(kernels: list) -> list:
    done = [k for k in kernels if not math.isnan(k.end)]
    if not done:
        return []
    k, path, seen = max(done, key=lambda x: x.end), [], set()
    while k is not None and id(k) not in seen:
        seen.add(id(k))
        if k.kind != "marker":
            path.append(k)
        k = k.pred
    return path[::-1]


def summarise(rp) -> ReplayResult:
    kernels = [k for k in rp.kernels if k.kind != "marker"]
    finished = [k for k in rp.kernels if not math.isnan(k.end)]
    makespan = max([k.end for k in finished] + list(rp._host_end.values()) + [0.0])
    ranks = []
    for r in sorted({int(x["rank"]) for x in rp.doc["ranks"]}):
        mine = [k for k in kernels if k.rank == r and not math.isnan(k.end)]
        ranks.append({"rank": r, "end_us": max([k.end for k in mine] + [rp._host_end.get(r, 0.0)]),
                      "compute_us": sum(k.end - k.start for k in mine if k.kind == "compute"),
                      "comm_us": sum(k.end - k.start for k in mine if k.kind in COMM), "kernels": len(mine)})
    net, router = rp.net, rp.router
    used = np.flatnonzero(net.carried[:router.pad] > 0)
    util = net.carried[used] / (router.caps[used] * makespan) if makespan > 0 else np.zeros(len(used))
    links = sorted(({"link": router.names[i], "kind": router.kinds[i], "GB": float(net.carried[i]) / 1e9,
                     "utilisation": float(u)} for i, u in zip(used, util)), key=lambda d: -d["utilisation"])
    unfinished = [describe(k) for k in rp.kernels if math.isnan(k.end) and k.kind != "marker"]
    hang = (f"{len(unfinished)} kernels never finished: a peer never issued the matching operation "
            f"(see `pkb check` for the hang)")
    notes = sorted(rp.notes) + ([hang] if unfinished else [])
    return ReplayResult(rp.topo.name, rp.world, makespan, ranks, [describe(k) for k in critical_path(rp.kernels)],
                        links, notes, unfinished, rp)
