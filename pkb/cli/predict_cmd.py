"""`pkb predict`: the time of one collective on a modelled machine, as nccl-tests would report it."""
from __future__ import annotations

import json

from pkb.errors import UsageError
from pkb.resolve import load
from pkbsim import CUSTOM_ALGOS, NCCL_ALGOS, OPS, PROTOCOLS, format_size, parse_size

ALGOS = sorted({a for v in NCCL_ALGOS.values() for a in v} | {a for v in CUSTOM_ALGOS.values() for a in v})


def add_parser(sub) -> None:
    p = sub.add_parser("predict", help="predict one collective's time on a topology",
                       description="Predict one collective as nccl-tests measures it (NCCL's algorithm and protocol "
                                   "choice, latency model, and max-min bandwidth sharing on the topology). "
                                   "Exit: 0 ok, 2 bad usage.")
    p.add_argument("--topology", required=True, metavar="NAME", help="machine (pkb topo list)")
    p.add_argument("--op", required=True, choices=OPS, help="the collective")
    p.add_argument("--bytes", required=True, metavar="SIZE",
                   help="nccl-tests size with optional unit: 4096, 64K, 64MiB, 1GB (K/M/G are binary as in nccl-tests)")
    p.add_argument("--nranks", required=True, type=int, metavar="N", help="ranks, placed on GPUs 0..N-1")
    p.add_argument("--algo", choices=ALGOS, help="force an algorithm (default: NCCL's choice); one_shot, two_shot "
                                                 "and nvls_custom are peer-memory kernels outside NCCL")
    p.add_argument("--proto", choices=PROTOCOLS, help="force a protocol (default: NCCL's choice)")
    p.add_argument("--engine", choices=("closed", "flow"), default="closed",
                   help="closed form (fast) or the discrete-event flow simulation")
    p.add_argument("--ctas", type=int, metavar="N", help="CTAs of a peer-memory kernel (default: enough for peak)")
    p.add_argument("--nodes", type=int, metavar="N", help="re-size a cluster topology to N nodes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args) -> int:
    from pkbsim import predict  # numpy, scipy and the flow model: 3 s, not for `pkb --help`

    try:
        nbytes = parse_size(args.bytes)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.ctas is not None and args.ctas < 1:
        raise UsageError("--ctas must be at least 1")
    topo = load(args.topology, args.nodes)
    try:
        p = predict(topo, args.op, nbytes, args.nranks, args.algo, args.proto, args.engine, args.ctas)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.json:
        print(json.dumps(p.to_json(), indent=1))
    else:
        print(f"{p.op} of {format_size(nbytes)} on {p.nranks} ranks of {p.topology}: {p.time_us:.2f} us  "
              f"algbw {p.algbw_GBps:.1f} GB/s  busbw {p.busbw_GBps:.1f} GB/s  ({p.algorithm}/{p.protocol}, "
              f"{p.channels} channels, {p.engine} engine)")
    return 0
