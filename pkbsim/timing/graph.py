"""A topology as a networkx graph: GPUs, NVSwitch, PCIe, CPU sockets, NICs, leaf and spine switches.

Every physical link is a pair of directed edges (one per direction) with the bandwidth payload gets (`cap`,
GB/s); a node with `cap` (a CPU root complex that copies GPU-to-GPU traffic through host memory) limits what
passes through it. NVSwitch chips are merged into one non-blocking node per machine, as NCCL does: a GPU's
traffic is striped over all its links, so the GPU port, not a chip, is the resource.
"""
from __future__ import annotations

import math

import networkx as nx

from pkbsim.timing.topology import Topology

W_NVLINK, W_PCIE, W_NET = 1, 10, 100   # routing weights: prefer NVLink, then PCIe, then the network


def prefix(topo: Topology, node: int) -> str:
    return f"n{node}/" if topo.nodes > 1 else ""


def nic_of(topo: Topology, local_gpu: int) -> int:
    """The NIC (rail) a GPU uses: GPU i and NIC i share a PCIe switch when there are as many NICs as GPUs."""
    return local_gpu * topo.nic.count // topo.gpus_per_node


def build_graph(topo: Topology) -> nx.DiGraph:
    g = nx.DiGraph(name=topo.name)
    for k in range(topo.nodes):
        _add_machine(g, topo, k)
    if topo.fabric:
        _add_fabric(g, topo)
    return g


def _link(g: nx.DiGraph, u: str, v: str, kind: str, cap: float, w: int, links: float = 1) -> None:
    for a, b in ((u, v), (v, u)):
        g.add_edge(a, b, kind=kind, cap=cap, w=w, links=links)


def _add_machine(g: nx.DiGraph, topo: Topology, k: int) -> None:
    p, host = prefix(topo, k), topo.host
    pcie = host.link_GBps * host.link_efficiency
    for i in range(topo.gpus_per_node):
        g.add_node(f"{p}gpu{i}", kind="gpu", gpu=k * topo.gpus_per_node + i, machine=k)
    if topo.nvswitch:
        g.add_node(f"{p}nvswitch", kind="nvswitch", chips=topo.nvswitch.chips, nvls=topo.nvswitch.nvls, machine=k)
        for i in range(topo.gpus_per_node):
            _link(g, f"{p}gpu{i}", f"{p}nvswitch", "nvlink", topo.nvlink.port_GBps, W_NVLINK,
                  topo.nvlink.links_per_gpu)
    for s in range(host.sockets):
        cpu = f"{p}cpu{s}"
        g.add_node(cpu, kind="cpu", machine=k, **({} if host.p2p else {"cap": host.host_copy_GBps}))
        if s:
            _link(g, f"{p}cpu{s - 1}", cpu, "socket", host.inter_socket_GBps, W_PCIE)
        attach = cpu
        if host.p2p:   # GPUs of a socket share a PCIe switch and reach each other without the CPU
            attach = f"{p}pcie{s}"
            g.add_node(attach, kind="pcie_switch", machine=k)
            _link(g, attach, cpu, "pcie", pcie, W_PCIE)
        for i in range(s * host.gpus_per_socket, (s + 1) * host.gpus_per_socket):
            _link(g, f"{p}gpu{i}", attach, "pcie", pcie, W_PCIE)
    if topo.nic:
        for r in range(topo.nic.count):
            g.add_node(f"{p}nic{r}", kind="nic", machine=k)
        for i in range(topo.gpus_per_node):
            _link(g, f"{p}gpu{i}", f"{p}nic{nic_of(topo, i)}", "pcie", pcie, W_PCIE)


def fabric_shape(topo: Topology) -> tuple[int, int, int, float]:
    """(nodes per leaf, leaves per rail, spines, links per leaf-spine pair) of a non-blocking two-level tree."""
    down = topo.fabric.leaf_ports // 2
    per_rail = math.ceil(topo.nodes / down)
    spines = max(1, math.ceil(topo.nic.count * per_rail / 2))
    return down, per_rail, spines, down / spines


def leaf_name(rail: int, group: int) -> str:
    return f"leaf{rail}.{group}"


def _add_fabric(g: nx.DiGraph, topo: Topology) -> None:
    down, per_rail, spines, links = fabric_shape(topo)
    port = topo.fabric.link_Gbps / 8 * topo.fabric.efficiency
    for s in range(spines):
        g.add_node(f"spine{s}", kind="spine")
    for r in range(topo.nic.count):
        for j in range(per_rail):
            leaf = leaf_name(r, j)
            g.add_node(leaf, kind="leaf", rail=r)
            for s in range(spines):
                _link(g, leaf, f"spine{s}", "net", links * port, W_NET, links)
    for k in range(topo.nodes):
        for r in range(topo.nic.count):
            _link(g, f"{prefix(topo, k)}nic{r}", leaf_name(r, k // down), "net", topo.nic.GBps, W_NET)
