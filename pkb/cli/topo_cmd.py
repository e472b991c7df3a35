"""`pkb topo`: the machines pkb can model (list) and one machine in detail (show)."""
from __future__ import annotations

import json

from pkb.errors import UsageError
from pkb.resolve import load
from pkbsim import list_topologies


def add_parser(sub) -> None:
    p = sub.add_parser("topo", help="list and show machine topologies",
                       description="List the machine descriptions in topologies/ or show one. Exit: 0 ok, 2 bad usage "
                                   "(unknown or malformed topology, --plot without matplotlib).")
    s = p.add_subparsers(dest="topo_command", metavar="ACTION")
    ls = s.add_parser("list", help="list topologies",
                      description="The machines in topologies/: GPUs, nodes, NVLink bandwidth, NVLS. Exit: 0.")
    ls.add_argument("--json", action="store_true", help="print one JSON object")
    show = s.add_parser("show", help="show one topology",
                        description="One machine: its GPUs, links, switches and their bandwidths and latencies, "
                                    "each with its source. Exit: 0, 2 bad usage (unknown or malformed topology).")
    show.add_argument("name", help="topology name (pkb topo list), NAME-<N>node for clusters, or a .toml path")
    show.add_argument("--nodes", type=int, default=None, metavar="N", help="re-size a cluster topology to N nodes")
    show.add_argument("--plot", metavar="FILE.png", help="draw the graph to FILE.png (needs matplotlib)")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.topo_command == "list":
        return _list(args)
    if args.topo_command == "show":
        return _show(args)
    raise UsageError("say what to do: pkb topo list | pkb topo show NAME")


def _list(args) -> int:
    rows = []
    for name in list_topologies():
        t = load(name)
        rows.append({"name": name, "gpus": t.num_gpus, "nodes": t.nodes, "gpu": t.gpu.model,
                     "nvlink_GBps": round(t.nvlink.port_GBps, 1) if t.nvlink else None, "nvls": t.nvls
                     and t.nodes == 1, "title": t.title})
    if args.json:
        print(json.dumps({"topologies": rows}, indent=1))
        return 0
    print(f"{'name':16s} {'GPUs':>5s} {'nodes':>5s}  {'NVLink GB/s':>11s}  NVLS  title")
    for r in rows:
        nv = f"{r['nvlink_GBps']:g}" if r["nvlink_GBps"] else "-"
        print(f"{r['name']:16s} {r['gpus']:5d} {r['nodes']:5d}  {nv:>11s}  {'yes' if r['nvls'] else 'no ':4s}  {r['title']}")
    print("clusters also take NAME-<N>node, e.g. h100-ib-128node (1024 GPUs)")
    return 0


def _show(args) -> int:
    from pkbsim import topology_lines, topology_plot, topology_summary  # the flow model: seconds, not for --help

    topo = load(args.name, args.nodes)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib; install it with `pip install matplotlib`") from None
        topology_plot(topo, args.plot)
    doc = topology_summary(topo)
    if args.json:
        print(json.dumps({**doc, "plot": args.plot}, indent=1))
    else:
        print("\n".join(topology_lines(doc)))
        if args.plot:
            print(f"graph drawn to {args.plot}")
    return 0
