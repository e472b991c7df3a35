"""`pkb run`: screen a batch of candidates in parallel, optionally score the survivors on this node's GPUs."""
from __future__ import annotations

import hashlib
import json
import os
import sys

from pkbsim.cli._sandbox import add_sandbox_argument, sandbox_ready
from pkbsim.cli.errors import UsageError
from pkbsim.cli.screen_cmd import add_pkb_arguments

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILT_IN = [os.path.join(ROOT, "tasks", "solutions"), os.path.join(ROOT, "tests", "broken_candidates")]


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="screen a batch of candidates (and score the survivors)",
                       description="Screen candidate files (or folders of them, named by task) in parallel worker "
                                   "processes; results go row by row into the SQLite store, so a stopped run resumes. "
                                   "Without CANDIDATES: the known-good solutions and the broken-candidate set. "
                                   "Verdicts: pass, reject (the candidate's fault), inconclusive (a limit of pkb, "
                                   "named; scored on hardware like a pass). Exit: 0 done, 2 bad usage.")
    p.add_argument("candidates", nargs="*", help="candidate files or folders (default: the built-in set)")
    p.add_argument("--tasks", nargs="+", metavar="SLUG", help="only these tasks (one SLUG: every file is for it)")
    p.add_argument("--topology", metavar="NAME", help="machine to predict on (default hgx-h100; h100-ib-2node "
                                                      "for tasks of more than 8 ranks)")
    p.add_argument("--world-size", type=int, metavar="N", help="ranks (default: 8 where the task allows it)")
    p.add_argument("--margin", type=float, default=0.8, help="reject below this predicted speed-up")
    p.add_argument("--seed", type=int, default=None, help="input seed for the whole batch (default: random)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="limit per simulated run")
    p.add_argument("--time-limit", type=float, default=600.0, metavar="S", help="limit per candidate's screen")
    p.add_argument("--memory-gb", type=float, default=12.0, help="address-space limit per worker process")
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), metavar="K",
                   help="parallel screening processes")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local processes, or a Ray cluster (RAY_ADDRESS; `pip install 'pkb[ray]'`)")
    p.add_argument("--no-cost", action="store_true", help="stop each screen after the functional stage")
    p.add_argument("--score", action="store_true",
                   help="score the candidates that pass or are inconclusive on this node (pkb score)")
    p.add_argument("--correctness-only", action="store_true",
                   help="with --score: correctness trials only, no timing (hardware status 'correct')")
    add_pkb_arguments(p)
    p.add_argument("--db", default=os.environ.get("PKB_DB", "pkb_results.sqlite"), help="SQLite results file")
    p.add_argument("--fresh", action="store_true", help="screen again even where the store has a result")
    p.add_argument("--json", action="store_true", help="print the batch's results as one JSON object")
    add_sandbox_argument(p)
    p.set_defaults(run=run)


def plan(args) -> tuple[list[dict], list[str]]:
    """The screening jobs for the arguments, and the files that could not be paired with a task."""
    from pkbsim.cli.screen_cmd import DEFAULT_TOPOLOGY, pick_world_size, pkb_tasks
    from pkbsim.cli.topo_cmd import load
    from pkbsim.screen.discover import candidate_files, pair
    from tasks.registry import all_tasks, get

    paths = args.candidates or [p for p in BUILT_IN if os.path.isdir(p)]
    files, missing = candidate_files(paths)
    if missing:
        raise UsageError(f"not found: {', '.join(missing)}; pass candidate files or folders")
    if not files:
        raise UsageError(f"no .py candidates in {', '.join(paths)}")
    tasks = {t.slug: t for t in all_tasks()}
    pkb_ids = pkb_tasks(args, tasks)
    only = None
    if args.tasks:
        only = [_known(s, tasks) for s in args.tasks]
    pairs, unknown = pair(files, set(tasks), only, pkb_ids)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    timelines = os.path.join(os.path.dirname(os.path.abspath(args.db)), "pkb_timelines")
    jobs = []
    for j in pairs:
        task = tasks.get(j.task) or get(j.task)
        topo_name = args.topology or (DEFAULT_TOPOLOGY if task.supports(8) or task.supports(2) else "h100-ib-2node")
        topo = load(topo_name)
        try:
            ws = pick_world_size(task, args.world_size, topo.num_gpus)
        except UsageError as e:
            unknown.append(f"{os.path.basename(j.candidate)}: {e}")
            continue
        jobs.append({"task": task.slug, "candidate": j.candidate, "world_size": ws, "topology": topo.name,
                     "seed": seed, "margin": args.margin, "timeout": args.timeout,
                     "timeline": os.path.join(timelines, timeline_name(task.slug, j.candidate)),
                     "pkb_root": args.pkb_root, "pkb_dtype": args.pkb_dtype, "cost": not args.no_cost})
    return jobs, unknown


def timeline_name(task: str, candidate: str) -> str:
    """The timeline's file name: two candidates with the same file name in different folders get two files."""
    where = hashlib.sha256(os.path.abspath(candidate).encode()).hexdigest()[:8]
    return f"{task}.{os.path.basename(candidate)[:-3]}.{where}.json"


def _known(slug: str, tasks: dict) -> str:
    from tasks.registry import TaskError, get
    if slug in tasks:
        return slug
    try:
        return get(slug).slug
    except TaskError as e:
        raise UsageError(str(e)) from None


def run(args) -> int:
    from pkbsim.screen.store import ScreenStore, file_sha

    if args.workers < 1 or args.time_limit <= 0 or args.margin <= 0:
        raise UsageError("--workers, --time-limit and --margin must be positive")
    jobs, unpaired = plan(args)
    for msg in unpaired:
        print(f"pkb run: skipped {msg}", file=sys.stderr)
    os.makedirs(os.path.join(os.path.dirname(os.path.abspath(args.db)), "pkb_timelines"), exist_ok=True)
    store = ScreenStore(args.db)
    results, todo = {}, []
    for job in jobs:
        # the inputs' dtype decides a ParallelKernelBench result as much as the file does
        job["sha"] = (file_sha(job["candidate"]) + (f":{job['pkb_dtype']}" if job["pkb_root"] else "")
                      + ("" if job["cost"] else ":no-cost"))
        done = None if args.fresh else store.get(job["task"], job["sha"], job["world_size"], job["topology"])
        if done:  # the same content may have been screened under another name
            results[(job["task"], job["candidate"])] = dict(done, candidate=job["candidate"])
        else:
            todo.append(job)
    progress = _Progress(len(jobs), len(results), quiet=args.json)

    def on_result(res: dict) -> None:
        sha = next(j["sha"] for j in todo if j["candidate"] == res["candidate"] and j["task"] == res["task"])
        store.put(sha, res)
        results[(res["task"], res["candidate"])] = res
        progress.advance(res)

    if args.executor == "ray":
        from pkbsim.screen.ray_executor import run_ray
        run_ray(todo, args.time_limit, args.memory_gb, on_result)
    else:
        from pkbsim.screen.pool import run_local
        run_local(todo, args.workers, args.time_limit, args.memory_gb, on_result, sandboxed=sandbox_ready(args))
    progress.close()
    rows = [results[(j["task"], j["candidate"])] for j in jobs if (j["task"], j["candidate"]) in results]
    scores = _score(rows, args) if args.score else {}
    if args.json:
        print(json.dumps({"db": os.path.abspath(args.db), "results": rows, "scores": scores,
                          "skipped": unpaired}, indent=1))
    else:
        print_table(rows, scores)
    return 0


def _score(rows: list[dict], args) -> dict:
    """Score the survivors on this node: NCCL on its GPUs, gloo on the CPU where there are none."""
    import torch

    from hwbackend.score import Protocol, score
    from pkbsim.screen.result import Verdict

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = "nccl" if gpus else "gloo"
    out = {}
    for r in rows:
        if not Verdict(r["verdict"]).goes_to_hardware:
            continue
        nproc = min(r["world_size"], gpus) if gpus else r["world_size"]
        if not args.json:
            print(f"pkb run: scoring {os.path.basename(r['candidate'])} for {r['task']} on {nproc} ranks ({backend})",
                  file=sys.stderr)
        protocol = Protocol(preset="full" if backend == "nccl" else "screen", correctness_only=args.correctness_only)
        out[r["candidate"]] = score(r["task"], r["candidate"], nproc, backend, protocol, db=args.db, resume=True)
    return out


class _Progress:
    """A progress bar on a terminal, one line per candidate otherwise."""

    def __init__(self, total: int, done: int, quiet: bool):
        self.total, self.done, self.quiet, self.bar = total, done, quiet, None
        if not quiet and sys.stderr.isatty():
            from rich.progress import Progress
            self.bar = Progress(transient=True)
            self.bar.start()
            self.task = self.bar.add_task("screening", total=total, completed=done)
        elif not quiet and done:
            print(f"pkb run: {done} of {total} already in the store", file=sys.stderr)

    def advance(self, res: dict) -> None:
        self.done += 1
        if self.bar:
            self.bar.update(self.task, advance=1, description=f"screened {os.path.basename(res['candidate'])}")
        elif not self.quiet:
            print(f"[{self.done}/{self.total}] {res['task']}: {os.path.basename(res['candidate'])}: {res['verdict']} "
                  f"({res['stage']})", file=sys.stderr)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


def summary_row(r: dict, score: dict | None = None) -> dict:
    """One table row per candidate (shared by `pkb run` and `pkb report`)."""
    p = r.get("predicted") or {}
    reason = r["reasons"][0] if r.get("reasons") else None
    return {"task": r["task"], "candidate": os.path.basename(r["candidate"]), "verdict": r["verdict"],
            "stage": r["stage"], "reason": f"{reason['kind']}: {reason['message']}" if reason else "",
            "predicted": p.get("speedup"), "bottleneck": p.get("bottleneck", ""), "uncertain": p.get("uncertain"),
            "measured": (score or {}).get("speedup"), "hw_status": (score or {}).get("status", "")}


def print_table(rows: list[dict], scores: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"pkb run: {len(rows)} candidates", show_lines=False)
    for col in ("task", "candidate", "verdict", "stage", "predicted", "bottleneck", "measured", "reason"):
        t.add_column(col, overflow="fold")
    for r in rows:
        s = summary_row(r, scores.get(r["candidate"]))
        pred = "" if s["predicted"] is None else f"{s['predicted']:.2f}x" + ("?" if s["uncertain"] else "")
        meas = "" if s["measured"] is None else f"{s['measured']:.2f}x ({s['hw_status']})"
        t.add_row(s["task"], s["candidate"], s["verdict"], s["stage"], pred, s["bottleneck"], meas, s["reason"][:90])
    Console(width=max(160, Console().width)).print(t)
    print(f"{tally(rows)}; '?' marks an uncertain prediction")


def tally(rows: list[dict]) -> str:
    """'N passed, N inconclusive (...), N rejected' (shared by `pkb run` and `pkb report`)."""
    n = {v: sum(r["verdict"] == v for r in rows) for v in ("pass", "inconclusive", "reject")}
    return (f"{n['pass']} passed, {n['inconclusive']} inconclusive (a limit of pkb: scored on hardware like a pass), "
            f"{n['reject']} rejected")
