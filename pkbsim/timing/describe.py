"""A topology as a summary (for `pkb topo show`), as JSON and as readable lines."""
from __future__ import annotations

import re

from pkbsim.timing.graph import fabric_shape
from pkbsim.timing.predict import router_for
from pkbsim.timing.topology import Topology


def summary(topo: Topology) -> dict:
    r = router_for(topo)
    g = r.graph
    doc = {
        "name": topo.name, "title": topo.title, "file": topo.path, "gpus": topo.num_gpus, "nodes": topo.nodes,
        "gpus_per_node": topo.gpus_per_node,
        "gpu": {"model": topo.gpu.model, "arch": topo.gpu.arch, "sms": topo.gpu.sms, "hbm_GB": topo.gpu.hbm_GB,
                "hbm_GBps": topo.gpu.hbm_GBps, "l2_MB": topo.gpu.l2_MB, "peak_tflops": topo.gpu.peak_tflops},
        "nvlink": None, "nvswitch": None, "nic": None, "fabric": None,
        "host": {"sockets": topo.host.sockets, "gpus_per_socket": topo.host.gpus_per_socket, "link": topo.host.link,
                 "link_GBps": topo.host.link_GBps, "p2p": topo.host.p2p, "host_copy_GBps": topo.host.host_copy_GBps},
        "nccl": {k: topo.nccl[k] for k in ("ring_channels", "nvls_channels", "nvls_efficiency")},
        "graph": {"nodes": g.number_of_nodes(), "directed_links": g.number_of_edges(), "resources": len(r.names)},
        "sources": list(topo.sources),
    }
    if topo.nvlink:
        nv = topo.nvlink
        doc["nvlink"] = {"generation": nv.generation, "links_per_gpu": nv.links_per_gpu, "link_GBps": nv.link_GBps,
                         "efficiency": nv.efficiency, "port_GBps": round(nv.port_GBps, 3)}
    if topo.nvswitch:
        sw = topo.nvswitch
        doc["nvswitch"] = {"generation": sw.generation, "chips": sw.chips, "ports_per_chip": sw.ports_per_chip,
                           "links_per_gpu_per_chip": list(sw.links_per_gpu_per_chip), "nvls": topo.nvls}
    if topo.nic:
        doc["nic"] = {"count": topo.nic.count, "Gbps": topo.nic.Gbps, "efficiency": topo.nic.efficiency,
                      "GBps": round(topo.nic.GBps, 3)}
    if topo.fabric:
        per_leaf, per_rail, spines, links = fabric_shape(topo)
        doc["fabric"] = {"kind": topo.fabric.kind, "leaf_ports": topo.fabric.leaf_ports, "rails": topo.nic.count,
                         "nodes_per_leaf": per_leaf, "leaves_per_rail": per_rail, "spines": spines,
                         "links_per_leaf_spine": links}
    return doc


def lines(doc: dict) -> list[str]:
    gpu = doc["gpu"]
    peaks = ", ".join(f"{k} {v:g}" for k, v in gpu["peak_tflops"].items())
    out = [f"{doc['name']}: {doc['title']}",
           (f"  GPUs      {doc['gpus']} x {gpu['model']} ({gpu['arch']}, {gpu['sms']} SMs, {gpu['hbm_GB']:g} GB HBM "
            f"at {gpu['hbm_GBps']:g} GB/s, L2 {gpu['l2_MB']:g} MB)"),
           f"  peak      {peaks} TFLOP/s (dense)"]
    if doc["nvlink"]:
        nv = doc["nvlink"]
        out.append(f"  NVLink    gen {nv['generation']}: {nv['links_per_gpu']} links x {nv['link_GBps']:g} GB/s per direction, "
                   f"efficiency {nv['efficiency']:g} -> {nv['port_GBps']:g} GB/s per GPU per direction")
    if doc["nvswitch"]:
        sw = doc["nvswitch"]
        out.append(f"  NVSwitch  gen {sw['generation']}: {sw['chips']} chips x {sw['ports_per_chip']} ports, links per GPU "
                   f"per chip {sw['links_per_gpu_per_chip']}, NVLS {'yes' if sw['nvls'] else 'no'} "
                   f"(efficiency {doc['nccl']['nvls_efficiency']:g})")
    h = doc["host"]
    copy = "" if h["p2p"] else f", no GPU peer-to-peer: copies through host memory at {h['host_copy_GBps']:g} GB/s per socket"
    out.append(f"  host      {h['sockets']} sockets x {h['gpus_per_socket']} GPUs, {h['link']} ({h['link_GBps']:g} GB/s){copy}")
    if doc["nic"]:
        n = doc["nic"]
        out.append(f"  NICs      {n['count']} per node x {n['Gbps']:g} Gb/s -> {n['GBps']:g} GB/s each")
    if doc["fabric"]:
        f = doc["fabric"]
        out.append(f"  fabric    {f['kind']}: {doc['nodes']} nodes, {f['rails']} rails x {f['leaves_per_rail']} leaves "
                   f"({f['nodes_per_leaf']} nodes each), {f['spines']} spines, {f['links_per_leaf_spine']:g} links per "
                   f"leaf-spine pair")
    gr = doc["graph"]
    out.append(f"  graph     {gr['nodes']} nodes, {gr['directed_links']} directed links, {gr['resources']} flow resources")
    out.append("  sources")
    out += [f"    - {s}" for s in doc["sources"]]
    return out


def plot(topo: Topology, path: str) -> None:
    """Draw the graph, layered by kind (GPUs at the bottom, spines on top). Needs matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    layer = {"gpu": 0, "pcie_switch": 1, "cpu": 2, "nvswitch": 1, "nic": 2, "leaf": 3, "spine": 4}
    g = router_for(topo).graph.to_undirected()
    layers: dict[int, list] = {}
    for n in sorted(g.nodes, key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)]):
        layers.setdefault(layer[g.nodes[n]["kind"]], []).append(n)   # natural order: gpu10 after gpu9
        g.nodes[n]["layer"] = layer[g.nodes[n]["kind"]]
    pos = nx.multipartite_layout(g, subset_key=layers, align="horizontal")
    colours = {"nvlink": "tab:green", "pcie": "tab:blue", "net": "tab:orange", "socket": "tab:gray"}
    fig, ax = plt.subplots(figsize=(min(40, 6 + g.number_of_nodes() / 8), 6))
    nx.draw_networkx_edges(g, pos, ax=ax, width=0.6, edge_color=[colours[d["kind"]] for *_, d in g.edges(data=True)])
    nx.draw_networkx_nodes(g, pos, ax=ax, node_size=60, node_color=[d["layer"] for _, d in g.nodes(data=True)],
                           cmap="viridis")
    if g.number_of_nodes() <= 80:
        nx.draw_networkx_labels(g, pos, ax=ax, font_size=6)
    ax.set_title(f"{topo.name}: {topo.title}\nNVLink green, PCIe blue, network orange", fontsize=9)
    ax.axis("off")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
