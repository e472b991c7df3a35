"""`pkb validate-model`: the timing model against published measurements, point by point."""
from __future__ import annotations

import json

from pkbsim import format_size


def add_parser(sub) -> None:
    p = sub.add_parser("validate-model", help="compare timing predictions with published measurements",
                       description="Print the error of every published point the timing model is checked against "
                                   "(targets: 10% at >= 4 MiB; 30% or 5 us below 256 KiB; device-side kernels "
                                   "outside NCCL 25% at >= 1 MiB). Exit: 0 ok, 1 with --strict when a judged point "
                                   "misses its target, 2 bad usage.")
    p.add_argument("--engine", choices=("closed", "flow"), default="closed", help="evaluate with this engine")
    p.add_argument("--strict", action="store_true", help="exit 1 when a fitted or held-out point misses its target")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args) -> int:
    from pkbsim import evaluate_model  # the timing models: seconds, not for `pkb --help`

    rows = evaluate_model(args.engine)
    judged = [r for r in rows if r.meets_target is not None]
    missed = [r.id for r in judged if not r.meets_target]
    summary = {"points": len(rows), "judged": len(judged), "met": len(judged) - len(missed), "missed": missed,
               "held_out": sum(r.role == "held-out" for r in rows), "fitted": sum(r.role == "fitted" for r in rows)}
    # issue 19, evidence 2: device-side kernels from 1 MiB on, measured against predicted, within 25%
    device = [r for r in rows if r.device_side and r.regime == "device"]
    summary["device_side"] = {
        "points": len(device), "judged": sum(r.meets_target is not None for r in device),
        "met": sum(r.meets_target is True for r in device),
        "context_within_25pct": sum(r.role == "context" and abs(r.error_pct) <= 25 for r in device),
        "context": sum(r.role == "context" for r in device)}
    if args.json:
        print(json.dumps({"engine": args.engine, "summary": summary, "points": [r.to_json() for r in rows]}, indent=1))
    else:
        print(f"{'point':24s} {'machine':15s} {'op':14s} {'algo':11s} {'n':>3s} {'size':>7s} {'metric':6s} "
              f"{'measured':>9s} {'predicted':>9s} {'error':>7s}  {'role':8s} {'target':11s} verdict")
        for r in rows:
            unit = "us" if r.metric == "time_us" else "GB/s"
            verdict = "-" if r.meets_target is None else "met" if r.meets_target else "MISSED"
            print(f"{r.id:24s} {r.topology:15s} {r.op:14s} {r.algorithm:11s} {r.nranks:3d} {format_size(r.bytes):>7s} "
                  f"{unit:6s} {r.measured:9.1f} {r.predicted:9.1f} {r.error_pct:+6.1f}%  {r.role:8s} {r.target:11s} "
                  f"{verdict}")
        print(f"{summary['met']} of {summary['judged']} judged points meet their target"
              + (f"; missed: {', '.join(missed)}" if missed else ""))
        d = summary["device_side"]
        print(f"device-side kernels at >= 1 MiB (25%): {d['met']} of {d['judged']} judged within 25%; "
              f"context rows {d['context_within_25pct']} of {d['context']} within 25%")
    return 1 if args.strict and missed else 0
