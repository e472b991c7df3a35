"""`pkb score`: score a candidate against a task's reference on real GPUs (NCCL) or the CPU (gloo), on
one node or, with --nnodes/--node-rank/--rdzv-endpoint, on several (the same command on each node)."""
from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager

import candidate_sandbox
from hwbackend import (BATCHES, CALLS, GRAPH_BATCHES, GLOO_MAX_RANKS, GLOO_RANKS_PER_CORE, JOB_TIMEOUT_S, LAUNCHES, TRIALS,
                       EndpointError, Rendezvous, Status, default_preset, parse_endpoint)
from pkb.cli._arguments import add_db_argument, add_parallelkernelbench_arguments, add_sandbox_argument, sandbox_ready
from pkb.cli._layout import check_node_layout
from pkb.errors import UsageError
from pkb.resolve import task_of
from pkb.store import ScoreStore

EXIT = {Status.FASTER: 0, Status.SLOWER: 0, Status.CORRECT: 0, Status.INCORRECT: 1, Status.INTEGRITY: 1,
        Status.ERROR: 4, Status.COMPILE_ERROR: 4, Status.TIMEOUT: 5}  # 2 is bad usage


def add_parser(sub) -> None:
    p = sub.add_parser("score", help="score a candidate on real GPUs (or gloo on the CPU)",
                       description="Run reference and candidate under torchrun, check correctness on secret-seeded "
                                   "inputs and time both. Exit: 0 faster/slower/correct, 1 incorrect/integrity, 4 "
                                   "error or compile error, 5 timeout, 2 bad usage.")
    p.add_argument("candidate", help="candidate file defining solution(...)")
    p.add_argument("--task", help="task slug or id (`pkb tasks` lists them); with --pkb-root the file's name "
                                  "names the problem")
    add_parallelkernelbench_arguments(p)
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=None, metavar="N",
                   help="ranks (default: number of GPUs, or 2 with gloo)")
    p.add_argument("--backend", choices=["nccl", "gloo"], default=None, help="default: nccl if GPUs are present")
    p.add_argument("--trials", type=int, default=TRIALS,
                   help=f"correctness trials with fresh inputs (default {TRIALS})")
    p.add_argument("--launches", type=int, default=LAUNCHES,
                   help=f"launches of each job, in alternating order (default {LAUNCHES})")
    p.add_argument("--batches", type=int, default=None,
                   help=f"timed batches per launch (default {BATCHES}, {GRAPH_BATCHES} with --graphs)")
    p.add_argument("--calls", type=int, default=CALLS,
                   help="timed calls per batch, run back to back (default: as many as make a batch about "
                        "0.1 s long with nccl, 0.05 s with gloo, from the reference's warm-up)")
    p.add_argument("--interleave", action="store_true",
                   help="an experiment: the two jobs of a launch alive at once, their batches taking turns, the "
                        "idle one stopped (sandboxed, one node); a stop does not reach work a candidate queued on "
                        "a GPU (docs/threat_model.md). Default: one job after the other")
    p.add_argument("--graphs", action="store_true",
                   help="capture each timed batch in one CUDA graph and time its replay, so that the host's launch "
                        "rate is out of the timed region (kernels of 10-100 us); a score either job of which cannot "
                        "be captured is timed again without (nccl only). Default: eager batches")
    p.add_argument("--correctness-only", action="store_true",
                   help="correctness trials only, no timing (status 'correct' instead of faster/slower)")
    p.add_argument("--preset", choices=["screen", "full"], default=None,
                   help="input sizes (default: full with nccl, screen with gloo)")
    p.add_argument("--timeout", type=float, default=JOB_TIMEOUT_S, metavar="S",
                   help="wall-clock limit per job (and for the other nodes to join)")
    p.add_argument("--nnodes", type=int, default=1, metavar="N",
                   help="nodes the job spans; run the same command on each, with its own --node-rank")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0, metavar="R",
                   help="this node's number; node 0 runs the scorer and prints the result")
    p.add_argument("--rdzv-endpoint", "--rdzv_endpoint", metavar="HOST:PORT",
                   help="with --nnodes > 1: node 0's address and a free port (torchrun's c10d rendezvous)")
    add_db_argument(p)
    p.add_argument("--label", help="group name for the leaderboard (default: the candidate's folder)")
    p.add_argument("--resume", action="store_true", help="reuse a stored result for the same file, task and size")
    p.add_argument("--json", action="store_true", help="print the result document as JSON")
    add_sandbox_argument(p)
    p.set_defaults(run=run)


def run(args) -> int:
    import torch  # (and the scorer, which imports it: not at module level, which `pkb --help` imports)

    from hwbackend import Protocol, ScoreOptions, ScoreRequest, gloo_rank_bound, score_candidate

    if not sandbox_ready(args):  # else the rank workers start in the sandbox (hwbackend/jobs.py)
        os.environ[candidate_sandbox.DISABLE] = "1"
    rdzv = _rendezvous(args)
    if args.node_rank == 0 and not os.path.isfile(args.candidate):
        raise UsageError(f"candidate {args.candidate!r} not found; pass the path of a file defining solution(...)")
    if args.parallelkernelbench_root and args.nnodes > 1:
        raise UsageError("--pkb-root scores on one node for now; drop --nnodes")
    task = task_of(args, simulated=False)  # the simulator's wrappers are not for a score
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = args.backend or ("nccl" if gpus else None)
    if backend is None:
        raise UsageError("no CUDA GPU here; pass --backend gloo to score on the CPU")
    if backend == "nccl" and not gpus:
        raise UsageError("--backend nccl needs CUDA GPUs and this machine has none; use --backend gloo")
    nproc = args.nproc_per_node or (gpus if backend == "nccl" else 2)
    if nproc < 1 or (backend == "nccl" and nproc > gpus):
        raise UsageError(f"--nproc-per-node {nproc} is not possible here ({gpus} GPUs)")
    gloo_bound = gloo_rank_bound()
    if backend == "gloo" and nproc > gloo_bound:
        raise UsageError(f"--nproc-per-node {nproc} is above the bound for gloo on this machine: {gloo_bound} "
                         f"({GLOO_RANKS_PER_CORE} ranks per CPU core, at most {GLOO_MAX_RANKS})")
    world = nproc * args.nnodes
    if not task.supports(world):
        raise UsageError(f"task {task.slug} supports world sizes {task.world_sizes.describe()}, not {world}; "
                         f"pass a supported --nproc-per-node" + (" and --nnodes" if rdzv else ""))
    if args.batches is None:
        args.batches = GRAPH_BATCHES if args.graphs else BATCHES
    if min(args.trials, args.launches, args.batches) < 1 or args.calls < 0 or args.timeout <= 0:
        raise UsageError("--trials, --launches and --batches must be >= 1, --calls >= 0 (0: chosen) and "
                         "--timeout > 0")
    preset = args.preset or default_preset(backend)
    if rdzv:
        check_node_layout(task, preset, nproc)
        if args.node_rank > 0:
            return _serve_node(rdzv, args, nproc)
    started = time.monotonic()
    progress = None if args.json else (lambda msg: print(f"pkb score: {time.monotonic() - started:6.1f} s  {msg}",
                                                         file=sys.stderr))
    with _cluster(rdzv, args.timeout) as cluster:
        protocol = Protocol(args.trials, args.launches, args.batches, args.calls, timeout=args.timeout,
                            preset=preset, correctness_only=args.correctness_only, interleave=args.interleave,
                            graphs=args.graphs)
        res = score_candidate(ScoreRequest(task.slug, args.candidate, nproc, backend, args.label), protocol,
                    ScoreOptions(ScoreStore(args.db) if args.db else None, args.resume, progress, cluster))
    if args.json:
        print(json.dumps(res.to_json(), indent=1))
    else:
        line = f"pkb score: {res.task or task.slug}: {res.status.upper()}"
        if res.speedup is not None:
            lo, hi = res.speedup_ci95
            line += (f" - speed-up {res.speedup:.3f}x (95% CI {lo:.3f}-{hi:.3f}, noise margin "
                     f"{res.noise_margin:.1%}{'' if res.resolved else ': not resolved'}), reference "
                     f"{res.reference_ms:.4f} ms, candidate {res.candidate_ms:.4f} ms per call")
            if args.graphs and res.clock_check:
                line += f"; timed as {res.clock_check.timed_as}"
        for f in res.findings:
            rank = f" rank {f.rank}" if f.rank is not None else ""
            print(f"  {f.kind}{rank}: {f.message}")
            if f.details:
                print("    " + f.details.strip().replace("\n", "\n    "))
        print(line)
    return EXIT[res.status]


def _rendezvous(args):
    """The nodes' meeting point, or None for a job on this machine alone."""
    if args.nnodes < 1:
        raise UsageError("--nnodes must be at least 1")
    if args.nnodes == 1:
        if args.rdzv_endpoint or args.node_rank:
            raise UsageError("--rdzv-endpoint and --node-rank only apply to a job over several nodes; pass --nnodes N")
        return None
    if not args.rdzv_endpoint:
        raise UsageError(f"--nnodes {args.nnodes} needs --rdzv-endpoint HOST:PORT: node 0's address and a free port")
    if not 0 <= args.node_rank < args.nnodes:
        raise UsageError(f"--node-rank {args.node_rank} is not in 0..{args.nnodes - 1}; number the nodes from 0")
    try:
        host, port = parse_endpoint(args.rdzv_endpoint)
    except EndpointError as e:
        raise UsageError(str(e)) from None
    return Rendezvous(host, port, args.nnodes)


@contextmanager
def _cluster(rdzv, timeout: float):
    """Node 0's session with the other nodes (None on one node): it hosts the rendezvous."""
    if rdzv is None:
        yield None
        return
    from hwbackend import Cluster  # torch: not at module level, which `pkb --help` imports

    try:
        cluster = Cluster(rdzv, timeout)
    except EndpointError as e:
        raise UsageError(str(e)) from None
    with cluster:
        yield cluster


def _serve_node(rdzv, args, nproc: int) -> int:
    from hwbackend import serve_node  # (as Cluster above)

    res = serve_node(rdzv, args.node_rank, nproc, args.timeout)
    if args.json:
        print(json.dumps({"node": res.node, "jobs": res.jobs, "status": "error" if res.error else "served",
                          "message": res.error}, indent=1))
    elif res.error:
        print(f"pkb score: node {res.node}: {res.error}", file=sys.stderr)
    else:
        print(f"pkb score: node {res.node} of {rdzv.nnodes}: ran its ranks of {res.jobs} job(s); node 0 reports "
              f"the result")
    return EXIT[Status.ERROR] if res.error else 0
