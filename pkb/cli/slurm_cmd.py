"""`pkb slurm`: write (and with --submit, submit) an sbatch script that scores a batch of candidates
across a Slurm allocation, one job step per candidate, all into one results store."""
from __future__ import annotations

import glob
import json
import os
import sys

from hwbackend import (JOB_TIMEOUT_S, SLURM_JOB_NAME, SLURM_PORT, SlurmError, SlurmPlan, default_preset, sbatch_script,
                       submit_sbatch)
from pkb.cli._arguments import add_db_argument
from pkb.cli._layout import check_node_layout
from pkb.errors import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("slurm", help="write an sbatch script that scores candidates across a Slurm allocation",
                       description="One job step per candidate; each step runs `pkb score` on every node of the "
                                   "allocation (rendezvous on its first node) and writes to one results store. "
                                   "Exit: 0 written (and submitted), 2 bad usage or sbatch missing/refusing.")
    p.add_argument("candidates", nargs="+", metavar="CANDIDATE", help="candidate files, or folders of them (*.py)")
    p.add_argument("--task", required=True, help="task slug or id (`pkb tasks` lists them)")
    p.add_argument("--nodes", type=int, required=True, metavar="N",
                   help="nodes of the allocation (each step spans all)")
    p.add_argument("--gpus-per-node", type=int, default=8, metavar="G", help="ranks (GPUs) per node (default 8)")
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl", help="pkb score's backend")
    p.add_argument("--preset", choices=["screen", "full"], default=None,
                   help="input sizes (default: full with nccl, screen with gloo)")
    p.add_argument("--timeout", type=float, default=JOB_TIMEOUT_S, metavar="S", help="pkb score's limit per job")
    add_db_argument(p, ", on a filesystem every node shares")
    p.add_argument("--label", help="group name for the leaderboard (default: each candidate's folder)")
    p.add_argument("--port", type=int, default=SLURM_PORT, help="rendezvous port of the first step (step i: PORT+i)")
    p.add_argument("--time", dest="time_limit", metavar="HH:MM:SS", help="Slurm time limit of the whole batch")
    p.add_argument("--partition", help="Slurm partition")
    p.add_argument("--account", help="Slurm account")
    p.add_argument("--job-name", default=SLURM_JOB_NAME, help="Slurm job name")
    p.add_argument("--score-arg", action="append", default=[], metavar="ARG",
                   help="extra option for every `pkb score`, e.g. --score-arg=--launches=4 (repeatable)")
    p.add_argument("--out", default=None, help="where to write the script (default: pkb-<task>.sbatch)")
    p.add_argument("--submit", action="store_true", help="submit the script with sbatch once written")
    p.add_argument("--json", action="store_true", help="print the plan (script path, steps) as one JSON object")
    p.set_defaults(run=run)


def _candidate_files(paths: list[str]) -> list[str]:
    files = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(f for f in glob.glob(os.path.join(path, "*.py")) if not os.path.basename(f).startswith("_"))
            if not found:
                raise UsageError(f"folder {path!r} holds no candidate (*.py); pass candidate files or their folder")
            files += found
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise UsageError(f"candidate {path!r} not found; pass files defining solution(...) or their folder")
    return [os.path.abspath(f) for f in dict.fromkeys(files)]


def run(args) -> int:
    from tasks.registry import TaskError, get  # torch: not at module level, which `pkb --help` imports

    try:
        task = get(args.task)
    except TaskError as e:
        raise UsageError(str(e)) from None
    if args.nodes < 1 or args.gpus_per_node < 1:
        raise UsageError("--nodes and --gpus-per-node must be at least 1")
    if not 0 < args.port < 65536 - 1000:
        raise UsageError(f"--port {args.port} leaves no room for one port per step; pick one below 64000")
    world = args.nodes * args.gpus_per_node
    if not task.supports(world):
        raise UsageError(f"task {task.slug} supports world sizes {task.world_sizes.describe()}, not {world} "
                         f"({args.nodes} x {args.gpus_per_node}); change --nodes or --gpus-per-node")
    preset = args.preset or default_preset(args.backend)
    if args.nodes > 1:
        check_node_layout(task, preset, args.gpus_per_node)
    plan = SlurmPlan(task=task.slug, candidates=_candidate_files(args.candidates), nodes=args.nodes,
                     gpus_per_node=args.gpus_per_node, db=os.path.abspath(args.db), backend=args.backend,
                     preset=args.preset, timeout=args.timeout, port=args.port, label=args.label,
                     time_limit=args.time_limit, partition=args.partition, account=args.account,
                     job_name=args.job_name, score_args=args.score_arg,
                     pkb=[sys.executable, "-m", "pkb.cli.main"])
    out = args.out or f"pkb-{task.slug}.sbatch"
    with open(out, "w") as f:
        f.write(sbatch_script(plan))
    submitted = None
    if args.submit:
        try:
            submitted = submit_sbatch(out)
        except SlurmError as e:
            raise UsageError(str(e)) from None
    if args.json:
        print(json.dumps({"script": os.path.abspath(out), "steps": len(plan.candidates),
                          "candidates": plan.candidates, "submitted": submitted}, indent=1))
    else:
        print(f"pkb slurm: wrote {out}: {len(plan.candidates)} step(s), one per candidate, each on {args.nodes} "
              f"node(s) x {args.gpus_per_node} GPU(s); results in {plan.db}")
        print(f"pkb slurm: {submitted}" if submitted else f"pkb slurm: submit it with `sbatch {out}`")
    return 0
