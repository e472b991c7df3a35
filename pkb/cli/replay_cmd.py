"""`pkb replay`: a recorded trace (`pkb check --trace`) timed on a modelled machine."""
from __future__ import annotations

import json

from pkb.errors import UsageError
from pkb.resolve import load


def add_parser(sub) -> None:
    p = sub.add_parser("replay", help="time a recorded trace on a topology",
                       description="Replay a trace written by `pkb check --trace FILE` on a modelled machine: "
                                   "time per rank, critical path, link utilisation, and optionally a Chrome/Perfetto "
                                   "timeline. Exit: 0 ok, 1 some kernels never finished (a peer never issued the "
                                   "matching op), 2 bad usage.")
    p.add_argument("trace", help="trace JSON from `pkb check --trace FILE` (use --shape-run for full-size shapes)")
    p.add_argument("--topology", required=True, metavar="NAME", help="machine (pkb topo list)")
    p.add_argument("--nodes", type=int, metavar="N", help="re-size a cluster topology to N nodes")
    p.add_argument("--launch", choices=("eager", "graph"), default="eager",
                   help="host launch overhead per kernel: eager PyTorch or CUDA-graph replay")
    p.add_argument("--dtype", metavar="DTYPE", help="peak FLOP/s column for compute ops (default bf16; the trace "
                                                    "does not record it)")
    p.add_argument("--calibration", metavar="FILE", help="override launch and compute constants: the JSON `pkb "
                                                        "calibrate` writes, or TOML with [launch]/[compute] tables")
    p.add_argument("--perfetto", metavar="OUT.json", help="write the simulated timeline as Chrome/Perfetto JSON")
    p.add_argument("--top", type=int, default=8, metavar="K", help="links and critical-path steps to print")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args) -> int:
    from pkbsim import Replay, write_chrome_trace  # numpy and the flow model: seconds, not for `pkb --help`

    try:
        with open(args.trace) as f:
            doc = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read trace {args.trace!r} ({e.strerror}); record one with "
                         f"`pkb check --trace FILE SCRIPT`") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{args.trace} is not JSON ({e.msg}, line {e.lineno}); record it again with "
                         f"`pkb check --trace FILE SCRIPT`") from None
    topo = load(args.topology, args.nodes)
    if args.dtype and args.dtype not in topo.gpu.peak_tflops:
        raise UsageError(f"{topo.name} lists no peak for dtype {args.dtype!r}; use one of "
                         f"{', '.join(topo.gpu.peak_tflops)}")
    try:
        result = Replay(topo, doc, args.launch, args.calibration, args.dtype).run()
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.perfetto:
        write_chrome_trace(args.perfetto, result)
    if args.json:
        print(json.dumps({**result.to_json(), "perfetto": args.perfetto}, indent=1))
    else:
        print("\n".join(_lines(result, args)))
    return 1 if result.unfinished else 0


def _lines(res, args) -> list[str]:
    out = [f"replay on {res.topology} ({args.launch} launches): {res.world_size} ranks, makespan {res.makespan_us:.1f} us",
           f"  {'rank':>4s} {'end us':>10s} {'compute us':>11s} {'comm us':>9s} {'kernels':>8s}"]
    out += [f"  {r['rank']:4d} {r['end_us']:10.1f} {r['compute_us']:11.1f} {r['comm_us']:9.1f} {r['kernels']:8d}"
            for r in res.ranks]
    path = res.critical_path
    out.append(f"  critical path: {len(path)} kernels" + (f" (last {args.top})" if len(path) > args.top else ""))
    for c in path[-args.top:]:
        extra = f" {c['algorithm']}/{c['protocol']}" if "algorithm" in c else ""
        out.append(f"    rank {c['rank']} stream {c['stream']}: {c['name']}{extra} {c['start_us']:.1f} -> "
                   f"{c['end_us']:.1f} us  {c['site']}")
    out.append("  busiest links:")
    out += [f"    {lk['link']:28s} {lk['kind']:6s} {lk['utilisation'] * 100:5.1f}%  {lk['GB']:.3f} GB"
            for lk in res.links[:args.top]]
    out += [f"  note: {n}" for n in res.notes]
    if args.perfetto:
        out.append(f"  timeline written to {args.perfetto} (open in ui.perfetto.dev)")
    return out
