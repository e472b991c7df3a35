"""NCCL's cost model pieces that are not bandwidth: which algorithms and protocols apply to an operation,
how many channels run, the latency term, and the protocol's wire overhead and bandwidth caps.

Constants come from data/nccl.toml (NCCL's own tables, docs/sources.md#nccl-cost-model); the bandwidth itself comes from the
flow plan on the topology (plans.py), so a machine NCCL never saw still gets a meaningful number.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pkbsim.timing.topology import Topology, nccl_constants

PROTOCOLS = ("LL", "LL128", "Simple")
NCCL_ALGOS = {   # what NCCL may pick for each operation (selection happens among these)
    "all_reduce": ("ring", "tree", "nvls"),
    "all_gather": ("ring", "nvls", "pat"),
    "reduce_scatter": ("ring", "nvls", "pat"),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all_to_all": ("p2p",),
    "sendrecv": ("p2p",),
}
# Kernels outside NCCL, by --algo only: device-initiated peer-memory kernels (symmetric memory, MSCCL++, Triton).
# all_gather one_shot: every GPU copies every peer's shard over NVLink at once (peer loads, stores or copy-engine puts).
# all_gather / reduce_scatter nvls_custom: multimem stores (ld_reduce) through the switch, as NCCL's symmetric STMC/LDMC
# kernels and PyTorch's multimem_all_gather.
CUSTOM_ALGOS = {"all_reduce": ("one_shot", "two_shot", "nvls_custom"), "all_gather": ("one_shot", "nvls_custom"),
                "reduce_scatter": ("nvls_custom",)}
PEER_KERNELS = ("one_shot", "two_shot", "nvls_custom")
OPS = tuple(NCCL_ALGOS)


@dataclass(frozen=True)
class Layout:
    """Where the ranks sit: the count, how many machines, and the most ranks on one machine."""
    nranks: int
    nodes: int
    per_node: int

    @property
    def node_index(self) -> int:   # NCCL's tables give [1 node, 2 nodes, >= 4 nodes] (3 nodes: as 2)
        return 0 if self.nodes == 1 else 1 if self.nodes <= 3 else 2


def layout(topo: Topology, ranks: list[int]) -> Layout:
    counts: dict[int, int] = {}
    for g in ranks:
        counts[topo.node_of(g)] = counts.get(topo.node_of(g), 0) + 1
    return Layout(len(ranks), len(counts), max(counts.values()))


def applicable(topo: Topology, op: str, algo: str, lay: Layout) -> str | None:
    """None when `algo` can run `op` on these ranks, else why not (one line)."""
    if algo not in NCCL_ALGOS[op] + CUSTOM_ALGOS.get(op, ()):
        return f"{algo} does not implement {op}; use one of {', '.join(NCCL_ALGOS[op] + CUSTOM_ALGOS.get(op, ()))}"
    if lay.nranks < 2 and algo != "p2p":
        return "needs at least 2 ranks"
    if algo in ("nvls", "nvls_custom") and not (topo.nvls and lay.nodes == 1):
        return "NVLS needs NVSwitch multicast (Hopper or later) and all ranks in one NVLink domain"
    if algo == "pat" and not (lay.nodes > 1 and lay.per_node == 1):
        return "PAT runs only with one GPU per node across several nodes"
    if algo in ("one_shot", "two_shot") and lay.nodes > 1:
        return "peer-memory kernels need all ranks in one machine"
    return None


def protocols_for(algo: str, op: str = "all_reduce") -> tuple[str, ...]:
    if algo in ("ring", "tree"):
        return PROTOCOLS
    return ("LL", "Simple") if (algo, op) == ("one_shot", "all_reduce") else ("Simple",)


def channels(topo: Topology, algo: str, proto: str, nbytes: int, lay: Layout) -> int:
    """Channel (CTA) count: NCCL's per-algorithm count, trimmed for small messages as enqueue.cc does."""
    c = topo.nccl
    if algo in ("nvls", "nvls_custom"):
        return c["nvls_channels"]
    if algo not in ("ring", "tree"):
        return 1
    n = c["ring_channels"]
    if lay.nodes > 1:   # one or more channels per NIC rail, so every NIC carries the same share
        n = math.ceil(n / topo.nic.count) * topo.nic.count
    table = nccl_constants()["channels"]
    p = PROTOCOLS.index(proto)
    per_channel = table["threads"][p] * table["bytes_per_thread"][p] * (lay.nranks if (algo, proto) == ("ring", "LL")
                                                                        else 1)
    while n > 1 and nbytes < n * per_channel:
        n -= 1
    return n


def latency_us(topo: Topology, op: str, algo: str, proto: str, lay: Layout, nbytes: int, nchannels: int) -> float:
    """NCCL's latency term for (algo, proto) (tuning.cc, docs/sources.md#nccl-cost-model); p2p and custom kernels as noted."""
    k = nccl_constants()
    lat = k["latency"]
    if algo == "p2p":
        hop = "net" if lay.nodes > 1 else topo.intra_link
        return k["p2p"]["base_us"] + lat["hop"][hop]["ring"][2]
    if algo in PEER_KERNELS:   # LL base for the LL one-shot all-reduce; the others (loads/stores + barrier) as NCCL's ST
        if (algo, proto) == ("one_shot", "Simple") and "symm_one_shot_base_us" in topo.nccl:
            return topo.nccl["symm_one_shot_base_us"]   # torch's: plain loads between two barriers, measured
        return topo.nccl["sym_base_latency_us"][0 if proto == "LL" else 1]
    p = PROTOCOLS.index(proto)
    base = lat["base"][algo][p]
    intra = lat["hop"][topo.intra_link][algo][p]
    inter = lat["hop"]["net"][algo][p]
    if lay.nodes > 1:
        floor = lat["net_overhead_us"] * (lat["simple_net_overhead_factor"] if proto == "Simple" else 1.0)
        intra = max(intra, floor)
    log_nodes = math.log2(lay.nodes) if lay.nodes > 1 else 0.0
    if algo == "ring":
        ar = op == "all_reduce"
        steps = (2 if ar else 1) * (lay.nranks - 1)
        inter_steps = (2 if ar else 1) * (lay.nodes - 1)
        t = base + (steps - inter_steps) * intra + inter_steps * inter
        if ar and proto == "Simple" and lay.nodes > 1 and nbytes / (nchannels * lay.nranks) >= 64:
            t *= lat["ring_simple_multinode_factor"]
        return t
    if algo == "tree":
        return base + 2 * ((lay.per_node - 1) * intra + log_nodes * inter)
    if algo == "nvls":
        return intra
    if algo == "pat":
        return base + log_nodes * inter / lat["pat_inter_divisor"] + lat["pat_per_rank_us"] * lay.nranks
    raise ValueError(algo)


def wire_and_cap(topo: Topology, op: str, algo: str, proto: str, lay: Layout,
                 nchannels: int) -> tuple[float, float]:
    """(wire bytes per payload byte, per-channel payload cap in GB/s) for NCCL's protocol refinements. NCCL's
    ring all_gather kernel moves fewer bytes per second than its reduce_scatter or all_reduce on the same ring
    (measured, no known reason: nccl#1281), which ring_allgather_efficiency charges as extra wire bytes."""
    if algo in ("nvls", "nvls_custom"):
        return 1.0 / topo.nccl["nvls_efficiency"], math.inf
    table = nccl_constants()["protocol"].get(algo)
    if table is None:
        return 1.0, math.inf
    p = PROTOCOLS.index(proto)
    wire = table["wire_multinode" if lay.nodes > 1 and "wire_multinode" in table else "wire"][p]
    if (algo, op) == ("ring", "all_gather"):
        wire /= topo.nccl["ring_allgather_efficiency"]
    key = table["cap"][p]
    if not key:
        return wire, math.inf
    cap = topo.nccl[key]
    cap = cap[lay.node_index] if isinstance(cap, list) else cap
    return wire, (cap / nchannels if key == "ll_max_bw" else cap)
