"""Resources and routes: every directed link (and every node with a capacity) is one resource index; a route
is the array of resources a flow between two GPUs loads.

Routes inside a machine come from networkx shortest paths on machine 0, computed once per GPU pair and
shifted to other machines by a constant offset (every machine's resources are one contiguous block).
Between machines: GPU -> its rail NIC -> leaf -> (spine) -> leaf -> the destination's rail NIC -> GPU. The
spine is picked from the source (node + rail, modulo the spine count): static ECMP that gives every leaf
uplink the same number of sources, so neither ring nor all-to-all traffic piles onto a few spines. PXN (forwarding over NVLink to a GPU on the destination's rail) is not
modelled; cross-rail traffic crosses a spine instead.
"""
from __future__ import annotations

import itertools

import networkx as nx
import numpy as np

from pkbsim.timing.graph import build_graph, fabric_shape, leaf_name, nic_of, prefix
from pkbsim.timing.topology import Topology

GB_PER_S = 1e3   # 1 GB/s = 1e3 bytes per µs: the engine runs in bytes and µs


class Router:
    def __init__(self, topo: Topology):
        self.topo = topo
        self.graph = build_graph(topo)
        self.names: list[str] = []
        self.kinds: list[str] = []
        caps: list[float] = []
        self._id: dict = {}

        def add(key, data) -> None:
            self._id[key] = len(self.names)
            self.names.append(key if isinstance(key, str) else f"{key[0]}->{key[1]}")
            self.kinds.append(data.get("kind", "host"))
            caps.append(data["cap"] * GB_PER_S)

        machine0 = [n for n, d in self.graph.nodes(data=True) if d.get("machine") == 0]
        self._local = self.graph.subgraph(machine0).copy()
        p0 = prefix(topo, 0)
        local_edges = [(u[len(p0):], v[len(p0):]) for u, v in self._local.edges]
        local_nodes = [n[len(p0):] for n in machine0 if "cap" in self.graph.nodes[n]]
        self.block = len(local_edges) + len(local_nodes)
        for k in range(topo.nodes):
            p = prefix(topo, k)
            for u, v in local_edges:
                add((p + u, p + v), self.graph.edges[p + u, p + v])
            for n in local_nodes:
                add(p + n, self.graph.nodes[p + n])
        for u, v, d in self.graph.edges(data=True):
            if (u, v) not in self._id:
                add((u, v), d)
        self._from: dict[int, dict] = {}          # source GPU on machine 0 -> routes to every node there
        self._remote: dict[tuple, tuple] = {}      # (machine, gpu, machine, gpu) -> route between machines
        self.pad = len(self.names)                  # index of a padding resource of infinite capacity
        self.caps = np.array(caps + [np.inf])       # bytes per µs

    def _local_routes(self, a: int) -> dict[str, tuple[int, ...]]:
        """Shortest paths from GPU a to every node of machine 0, as resource tuples (one Dijkstra per source)."""
        if a not in self._from:
            paths = nx.single_source_dijkstra_path(self._local, f"{prefix(self.topo, 0)}gpu{a}", weight="w")
            self._from[a] = {node: self._resources(path) for node, path in paths.items()}
        return self._from[a]

    def _local_route(self, a: int, b: int) -> tuple[int, ...]:
        return self._local_routes(a)[f"{prefix(self.topo, 0)}gpu{b}"]

    def _resources(self, path: list[str]) -> tuple[int, ...]:
        ids = [self._id[(u, v)] for u, v in itertools.pairwise(path)]
        ids += [self._id[n] for n in path[1:-1] if n in self._id]
        return tuple(ids)

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        """Resource indices a flow from GPU src to GPU dst loads (empty when src == dst)."""
        t = self.topo
        (ka, a), (kb, b) = divmod(src, t.gpus_per_node), divmod(dst, t.gpus_per_node)
        if src == dst:
            return ()
        if ka == kb:
            off = ka * self.block
            return tuple(r + off for r in self._local_route(a, b))
        return self._remote_route(ka, a, kb, b)

    def _remote_route(self, ka: int, a: int, kb: int, b: int) -> tuple[int, ...]:
        key = (ka, a, kb, b)
        if key not in self._remote:
            self._remote[key] = self._fabric_route(ka, a, kb, b)
        return self._remote[key]

    def _fabric_route(self, ka: int, a: int, kb: int, b: int) -> tuple[int, ...]:
        t = self.topo
        down, _, spines, _ = fabric_shape(t)
        ra, rb = nic_of(t, a), nic_of(t, b)
        pa, pb = prefix(t, ka), prefix(t, kb)
        la, lb = leaf_name(ra, ka // down), leaf_name(rb, kb // down)
        path = [f"{pa}gpu{a}", f"{pa}nic{ra}", la]
        if la != lb:
            path += [f"spine{(ka + ra) % spines}", lb]
        path += [f"{pb}nic{rb}", f"{pb}gpu{b}"]
        return self._resources(path)

    def loop_route(self, gpu: int) -> tuple[int, ...]:
        """GPU -> NVSwitch -> GPU: the egress and ingress ports an NVLS (multicast/reduce) flow loads."""
        k, i = divmod(gpu, self.topo.gpus_per_node)
        p = prefix(self.topo, k)
        return (self._id[(f"{p}gpu{i}", f"{p}nvswitch")], self._id[(f"{p}nvswitch", f"{p}gpu{i}")])

    def hop_class(self, src: int, dst: int) -> str:
        """nvlink, pcie or net: which column of NCCL's latency table a hop from src to dst pays."""
        t = self.topo
        if t.node_of(src) != t.node_of(dst):
            return "net"
        return t.intra_link

    def pack(self, routes: list[tuple[int, ...]]) -> np.ndarray:
        """Routes as one (k, L) int array, padded with the infinite resource, L = the longest route."""
        width = max((len(r) for r in routes), default=1) or 1
        out = np.full((len(routes), width), self.pad, dtype=np.int64)
        for i, r in enumerate(routes):
            out[i, :len(r)] = r
        return out
