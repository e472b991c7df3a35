"""`pkb screen`: judge one candidate against a task on the simulated world and the timing model."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile

from pkb.cli._arguments import add_parallelkernelbench_arguments, add_sandbox_argument
from pkb.cli._screen_arguments import add_semantics_argument, add_sizes_budget_argument, semantics, sizes_budget
from pkb.errors import UsageError
from pkb.refine.feedback import brief
from pkb.resolve import DEFAULT_TOPOLOGY, checkout_of, default_topology, load, pick_world_size, task_of
from pkbsim import MARGIN, RUN_TIMEOUT_S


def add_parser(sub) -> None:
    p = sub.add_parser("screen", help="judge a candidate without a GPU (static, functional, cost)",
                       description="Screen a candidate for a task in stages, stopping at the first that rejects: "
                                   "static (imports, signature, tampering, nvcc compile check of inline CUDA), "
                                   "functional (simulated world at screen size, two trials, protocol findings and "
                                   "outputs), cost (full-size shape runs replayed on the topology). "
                                   "Exit: 0 pass, 1 reject, 2 bad usage, 3 inconclusive (a limit of pkb, named).")
    p.add_argument("candidate", help="candidate file defining solution(...)")
    p.add_argument("--task", help="task slug or id (`pkb tasks` lists them); with --pkb-root the file's name "
                                  "(<id>_<name>[_<backend>].py) can pick its problem instead")
    p.add_argument("--topology", default=None, metavar="NAME",
                   help=f"machine to predict on (default {DEFAULT_TOPOLOGY}, or h100-ib-2node for more than 8 ranks)")
    p.add_argument("--world-size", type=int, default=None, metavar="N",
                   help="ranks (default 8 where the task allows it, else its smallest supported size)")
    p.add_argument("--margin", type=float, default=MARGIN, help=f"reject below this predicted speed-up (default {MARGIN})")
    p.add_argument("--seed", type=int, default=None, help="input seed (default: random, reported)")
    p.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, metavar="S", help="limit per simulated run (seconds)")
    p.add_argument("--timeline", metavar="FILE", help="write the candidate's simulated timeline (Chrome trace JSON)")
    p.add_argument("--no-cost", action="store_true", help="stop after the functional stage")
    add_sizes_budget_argument(p)
    p.add_argument("--feedback", action="store_true",
                   help="short structured output for refinement loops: first failing stage, site, bottleneck")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_parallelkernelbench_arguments(p)
    add_semantics_argument(p)
    add_sandbox_argument(p)
    p.set_defaults(run=run, leave_at_once=True)   # main._leave: no teardown after the verdict is out


def options(args, task):
    """ScreenOptions from parsed arguments (shared with `pkb run`)."""
    from pkbsim import ScreenOptions  # the screen's pipeline (torch): `pkb --help` imports this module

    if args.margin <= 0 or args.timeout <= 0:
        raise_usage("--margin and --timeout must be positive")
    topo = load(args.topology or default_topology(task))
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    extra = {} if sizes_budget(args) is None else {"sizes_budget": sizes_budget(args)}
    return ScreenOptions(pick_world_size(task, args.world_size, topo.num_gpus), topo, seed, args.margin,
                         args.timeout, cost=not args.no_cost, checkout=checkout_of(args), semantics=semantics(args),
                         **extra)


def raise_usage(msg: str):
    raise UsageError(msg)


def run(args) -> int:
    from pkbsim import ReferenceFailed, screen_candidate  # (as ScreenOptions above)

    if not os.path.isfile(args.candidate):
        raise_usage(f"candidate {args.candidate!r} not found; pass the path of a file defining solution(...)")
    task = task_of(args)
    opts = options(args, task)
    opts.timeline = args.timeline or os.path.join(tempfile.gettempdir(), "pkb-timelines",
                                                  f"{task.slug}.{os.path.basename(args.candidate)}.json")
    os.makedirs(os.path.dirname(os.path.abspath(opts.timeline)), exist_ok=True)
    out = sys.stderr if args.json else sys.stdout
    try:
        with contextlib.redirect_stdout(out):
            res = screen_candidate(task, args.candidate, opts)
    except ReferenceFailed as e:
        raise_usage(f"{e}; this is a bug in the task or in pkb, not in the candidate")
    if args.json:
        print(json.dumps(res.to_json(), indent=1))
    elif args.feedback:
        print(feedback(res))
    else:
        print(render(res))
    return res.verdict.exit_code


def feedback(res) -> str:
    """A few lines a refinement loop can act on (the text lives with the loop's: pkb/refine/feedback.py)."""
    return brief(res)


def render(res) -> str:
    head = (f"pkb screen: {os.path.basename(res.candidate)} for {res.task} on {res.topology}, {res.world_size} ranks, "
            f"seed {res.seed}")
    lines = [head]
    for r in res.reasons:
        lines.append(f"  {r.kind}: {r.message}" + (f"\n    at {r.site}" if r.site else ""))
    for r in res.warnings:
        lines.append(f"  warning ({r.kind}, a fault under pkb's rules only): {r.message}"
                     + (f"\n    at {r.site}" if r.site else ""))
    for f in res.findings:
        lines += ["  " + ln for ln in [f"{f.kind.upper()}: {f.message}", *f.details[:4]]]
    for name, rep in (res.compile or {}).items():
        for k, v in rep.get("kernels", {}).items():
            lines.append(f"  nvcc {name}: {k}: {v.get('registers', '?')} registers, {v.get('smem_bytes', 0)} B smem, "
                         f"{v.get('spill_stores', 0)} B spill stores")
    lines += [f"  note: {n}" for n in res.notes]
    p = res.predicted
    if p:
        lines.append(f"  predicted: reference {p.reference_us:.1f} us, candidate {p.candidate_us:.1f} us, speed-up "
                     f"{p.speedup:.2f}x, {p.bottleneck}" + (" (uncertain)" if p.uncertain else ""))
        lines += [f"  note: {n}" for n in p.notes[:4]]
        if res.timeline:
            lines.append(f"  timeline: {res.timeline} (open in ui.perfetto.dev)")
    checked = ", ".join(res.checked) or "nothing"
    secs = sum(res.seconds.values())
    others = "".join(f"; {v} under {s}'s" for s, v in res.verdicts.items() if s != res.semantics and v != res.verdict)
    lines.append(f"{res.verdict.upper()} under {res.semantics}'s rules{others}, at stage {res.stage} (checked: "
                 f"{checked}; {secs:.1f} s)")
    return "\n".join(lines)
