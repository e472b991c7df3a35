"""`pkb validate-model`: the timing model against published measurements, point by point."""
from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser("validate-model", help="compare timing predictions with published measurements",
                       description="Print the error of every published point the timing model is checked against "
                                   "(targets: 10% at >= 4 MiB; 30% or 5 us below 256 KiB). Exit: 0 ok, 1 with "
                                   "--strict when a judged point misses its target, 2 bad usage.")
    p.add_argument("--engine", choices=("closed", "flow"), default="closed", help="evaluate with this engine")
    p.add_argument("--strict", action="store_true", help="exit 1 when a fitted or held-out point misses its target")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args) -> int:
    from pkbsim.timing.fidelity import evaluate
    from pkbsim.timing.units import format_size

    rows = evaluate(args.engine)
    judged = [r for r in rows if r.meets_target is not None]
    missed = [r.id for r in judged if not r.meets_target]
    summary = {"points": len(rows), "judged": len(judged), "met": len(judged) - len(missed), "missed": missed,
               "held_out": sum(r.role == "held-out" for r in rows), "fitted": sum(r.role == "fitted" for r in rows)}
    if args.json:
        print(json.dumps({"engine": args.engine, "summary": summary, "points": [r.to_json() for r in rows]}, indent=1))
    else:
        print(f"{'point':22s} {'machine':15s} {'op':14s} {'n':>3s} {'size':>7s} {'metric':6s} {'measured':>9s} "
              f"{'predicted':>9s} {'error':>7s}  {'regime':9s} {'role':8s} target")
        for r in rows:
            unit = "us" if r.metric == "time_us" else "GB/s"
            verdict = "-" if r.meets_target is None else "met" if r.meets_target else "MISSED"
            print(f"{r.id:22s} {r.topology:15s} {r.op:14s} {r.nranks:3d} {format_size(r.bytes):>7s} {unit:6s} "
                  f"{r.measured:9.1f} {r.predicted:9.1f} {r.error_pct:+6.1f}%  {r.regime:9s} {r.role:8s} {verdict}")
        print(f"{summary['met']} of {summary['judged']} judged points meet their target"
              + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 1 if args.strict and missed else 0
