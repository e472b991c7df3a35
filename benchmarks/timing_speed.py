"""Speed of the timing engine, measured in one run (no asserts; prints numbers).

- an 8-GPU all_reduce prediction (closed form and flow simulation), cold (first call builds the routes) and warm;
- a 72-GPU all-to-all on GB200 NVL72 with 64 chunks per peer and +-20% jitter per chunk, through the SimPy
  flow network: every (source, destination) pair pipelines its 64 chunks back to back, which is one flow of
  their summed size (exact under the fluid model; tests/test_timing_flows.py checks it), so the 5,112 pairs
  finish at 5,112 distinct times and each finish re-solves the max-min rates of the flows still active
  (exact), and again with finishes batched onto a 0.1 µs and a 1 µs grid (FlowNetwork resolution_us);
  the same with every chunk as its own flow, on fewer chunks, to show what that costs;
- an all_reduce over 1024 GPUs (128 H100 nodes), NCCL's choice and forced ring, with the flow simulation.
Usage: python benchmarks/timing_speed.py [--json] [--only CASE ...] (a2a-exact: the exact all-to-all alone)
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import simpy

from pkbsim.timing.network import FlowNetwork
from pkbsim.timing.predict import predict, router_for
from pkbsim.timing.topology import load_topology


def timed(fn, repeat: int = 1):
    t0 = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return (time.perf_counter() - t0) / repeat, out


def all_to_all_jitter(chunks: int, per_chunk_flows: bool, resolution_us: float = 0.0, seed: int = 0) -> dict:
    topo = load_topology("gb200-nvl72")
    router = router_for(topo)
    n, chunk = topo.num_gpus, float(1 << 20)
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    net = FlowNetwork(env, router.caps, router.pad, resolution_us=resolution_us)
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    sizes = rng.uniform(0.8, 1.2, (len(pairs), chunks)) * chunk

    def sender(i, route):
        if per_chunk_flows:
            for c in range(chunks):
                yield net.start(route, [sizes[i, c]])
        else:
            yield net.start(route, [sizes[i].sum()])

    t0 = time.perf_counter()
    for i, (a, b) in enumerate(pairs):
        env.process(sender(i, router.pack([router.route(a, b)])))
    env.run()
    wall = time.perf_counter() - t0
    ideal = sizes.sum(axis=1).reshape(n, n - 1).sum(axis=1).max() / router.caps[0]
    return {"gpus": n, "chunks_per_peer": chunks, "per_chunk_flows": per_chunk_flows, "flows": net.flows_started,
            "solves": net.solves, "simulated_us": env.now, "egress_bound_us": float(ideal), "wall_s": wall}


def single_node_rows() -> list[tuple]:
    h100 = load_topology("hgx-h100")
    cold, p = timed(lambda: predict(h100, "all_reduce", 64 << 20, 8))
    rows = [("8-GPU all_reduce 64 MiB, closed form, cold (builds routes)", cold * 1e3, "ms", p.algorithm)]
    for engine in ("closed", "flow"):
        warm, p = timed(lambda e=engine: predict(h100, "all_reduce", 64 << 20, 8, engine=e), repeat=50)
        rows.append((f"8-GPU all_reduce 64 MiB, {engine}, warm", warm * 1e3, "ms", f"{p.time_us:.1f} us simulated"))
    return rows


def all_to_all_rows(resolutions: tuple[float, ...]) -> list[tuple]:
    """The first resolution should be 0 (exact): the grid rows report their error against it."""
    rows, exact = [], None
    for res in resolutions:
        a2a = all_to_all_jitter(64, per_chunk_flows=False, resolution_us=res)
        exact = exact or a2a["simulated_us"]
        grid = "exact" if res == 0 else f"{res:g} us grid"
        detail = (f"{a2a['flows']} flows, {a2a['solves']} solves, {a2a['simulated_us']:.2f} us simulated "
                  f"({(a2a['simulated_us'] / exact - 1) * 100:+.4f}% vs exact; egress bound "
                  f"{a2a['egress_bound_us']:.0f})")
        rows.append((f"72-GPU all-to-all, 64 chunks/peer, +-20% jitter, {grid}", a2a["wall_s"], "s", detail))
    return rows


def chunk_flow_rows() -> list[tuple]:
    small = all_to_all_jitter(2, per_chunk_flows=True)
    return [("72-GPU all-to-all, 2 chunks/peer, every chunk its own flow", small["wall_s"], "s",
             f"{small['flows']} flows, {small['solves']} solves")]


def cluster_rows() -> list[tuple]:
    big = load_topology("h100-ib-128node")
    cold, _ = timed(lambda: router_for(big))
    rows = [("1024-GPU cluster: graph and resources (once)", cold, "s", "")]
    for algo in (None, "ring"):
        wall, p = timed(lambda a=algo: predict(big, "all_reduce", 1 << 30, 1024, algo=a, engine="flow"))
        detail = (f"{p.algorithm}/{p.protocol}, {p.channels} ch, {p.time_us / 1e3:.2f} ms simulated, "
                  f"busbw {p.busbw_GBps:.0f} GB/s")
        rows.append((f"1024-GPU all_reduce 1 GiB, flow, {algo or 'NCCL choice'}", wall, "s", detail))
    return rows


CASES = {"8gpu": single_node_rows, "a2a": lambda: all_to_all_rows((0.0, 0.1, 1.0)),
         "a2a-exact": lambda: all_to_all_rows((0.0,)), "chunks": chunk_flow_rows, "cluster": cluster_rows}
ALL = ("8gpu", "a2a", "chunks", "cluster")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", choices=sorted(CASES), action="append",
                    help="run only this case (repeatable); default: " + ", ".join(ALL))
    args = ap.parse_args()
    rows = [row for case in args.only or ALL for row in CASES[case]()]
    if args.json:
        print(json.dumps([{"what": w, "value": v, "unit": u, "detail": d} for w, v, u, d in rows], indent=1))
        return
    for what, value, unit, detail in rows:
        print(f"{what:66s} {value:9.3f} {unit:2s}  {detail}")


if __name__ == "__main__":
    main()
