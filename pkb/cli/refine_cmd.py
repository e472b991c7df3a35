"""`pkb refine`: a code model in a generate-screen-fix loop with the simulator's feedback (pkb/refine/)."""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.parse

from pkb.cli._arguments import add_db_argument, add_parallelkernelbench_arguments, add_sandbox_argument, sandbox_ready
from pkb.cli._screen_arguments import add_batch_limits
from pkb import batch
from pkb.errors import UsageError
from pkb.refine import plan as planning
from pkb.refine.client import ChatClient
from pkb.refine.kernelgen import write_best
from pkb.refine.loop import LoopOptions, conversation, refine_all
from pkb.refine.redact import redact, register
from pkb.refine.screening import Screener
from pkb.store import RefineStore
from pkbsim import ScreenResult, Verdict

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULTS = {"steps": 5, "target": 1.0}
EXIT = "Exit: 0 every task reached the target, 1 some task spent its steps without, 2 bad usage, 3 the endpoint failed."


def add_parser(sub) -> None:
    p = sub.add_parser("refine", help="drive a code model with the simulator's feedback (generate, screen, fix)",
                       description="Send a task's prompt (pkb prompt) to an OpenAI-compatible chat endpoint, screen "
                                   "the file in its reply on the simulator, send back the feedback (the failing stage, "
                                   "the finding with the file's own lines, or the predicted speed-up and bottleneck), "
                                   "until a pass at --target or --steps replies. Every step is stored in --db; "
                                   "`--run NAME` of a stored run resumes it. " + EXIT)
    what = p.add_argument_group("what to refine")
    what.add_argument("--task", action="append", default=[], metavar="SLUG", help="a suite task (repeatable)")
    what.add_argument("--problem", action="append", default=[], metavar="ID",
                      help="with --pkb-root: a ParallelKernelBench problem id, or all (repeatable)")
    what.add_argument("--from", dest="start_dir", metavar="DIR",
                      help="kernelgen's output folder (<id>_<name>_<backend>.py): each file is its problem's step 0")
    add_parallelkernelbench_arguments(p)
    model = p.add_argument_group("the model")
    model.add_argument("--model", metavar="NAME", help="the endpoint's model name (required for a new run)")
    model.add_argument("--base-url", metavar="URL",
                       help=f"OpenAI-compatible endpoint (default $OPENAI_BASE_URL or {DEFAULT_BASE_URL})")
    model.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                       help="the environment variable holding the API key (read, sent, never stored)")
    model.add_argument("--parallel", type=int, default=4, metavar="K", help="tasks refined at once")
    model.add_argument("--max-requests", type=int, default=None, metavar="R",
                       help="requests in flight at once over all tasks (default: --parallel)")
    model.add_argument("--retries", type=int, default=ChatClient.retries,
                       help="retries of a request on HTTP 429/5xx (back-off)")
    model.add_argument("--backoff", type=float, default=ChatClient.backoff, metavar="S",
                       help="first retry's delay, doubled each time")
    model.add_argument("--request-timeout", type=float, default=ChatClient.timeout, metavar="S",
                       help="seconds to wait for one reply of the endpoint")
    model.add_argument("--temperature", type=float, default=None,
                       help="sampling temperature sent with each request (default: the endpoint's own)")
    loop = p.add_argument_group("the loop")
    loop.add_argument("--steps", type=int, default=None, help=f"replies per task (default {DEFAULTS['steps']}; a "
                                                              f"resumed run may raise it)")
    loop.add_argument("--target", type=float, default=None,
                      help=f"stop on a pass at this predicted speed-up (default {DEFAULTS['target']:g}; 0: any pass)")
    loop.add_argument("--backend", choices=("cuda", "triton", "torch"), default="cuda", help="what the prompt asks for")
    loop.add_argument("--run", dest="run_name", metavar="NAME", help="the run's name (default: new); a stored run's name resumes it")
    loop.add_argument("--dry-run", action="store_true", help="print the first prompt of each task and exit")
    loop.add_argument("--show", metavar="RUN", help="print a stored run's transcript (replies and feedback) and exit")
    loop.add_argument("--out", metavar="DIR", help="write each task's best candidate there as <id>_<name>_<backend>.py")
    loop.add_argument("--score", action="store_true", help="score each task's best candidate on this node (pkb score)")
    screen = p.add_argument_group("the screen")
    screen.add_argument("--topology", metavar="NAME", help="machine to predict on (default hgx-h100)")
    screen.add_argument("--world-size", type=int, metavar="N", help="ranks (default: 8 where the task allows it)")
    screen.add_argument("--seed", type=int, default=None, help="input seed for the run (default: random, stored)")
    add_batch_limits(screen, "screens at once over all tasks")
    screen.add_argument("--no-cost", action="store_true", help="stop each screen after the functional stage")
    add_db_argument(p)
    p.add_argument("--json", action="store_true", help="print the run's outcome as one JSON object")
    add_sandbox_argument(p)
    p.set_defaults(run=run)


def run(args) -> int:
    for name in ("parallel", "workers", "retries"):
        if getattr(args, name) < (0 if name == "retries" else 1):
            raise UsageError(f"--{name.replace('_', '-')} must be {'>= 0' if name == 'retries' else 'positive'}")
    if (args.steps is not None and args.steps < 1) or (args.target is not None and args.target < 0):
        raise UsageError("--steps must be positive and --target >= 0")
    if args.show:
        if not os.path.isfile(args.db):
            raise UsageError(f"no results store at {args.db}; pass --db FILE")
        return _show(RefineStore(args.db), args.show, args.json)
    if args.dry_run:
        return _dry_run(args)
    return _refine(args)


def _selection(args):
    return planning.Selection(tuple(args.task), tuple(args.problem), args.parallelkernelbench_root,
                     args.parallelkernelbench_dtype, args.start_dir, args.backend,
                     args.topology, args.world_size, args.seed, args.margin, args.timeout, not args.no_cost)


def _dry_run(args) -> int:
    plans = planning.plans_for(_selection(args))
    if args.json:
        _say(json.dumps({"tasks": [{"task": p.spec.task, "messages": [m.__dict__ for m in conversation(p.prompt, [])]}
                                    for p in plans]}, indent=1))
        return 0
    for p in plans:
        _say(p.prompt)
    return 0


def _refine(args) -> int:
    store = RefineStore(args.db) if args.run_name and os.path.isfile(args.db) else None
    stored = store.run_options(args.run_name) if store else None
    if stored:
        plans = planning.from_json(stored["plans"])
        asked = {p.spec.task for p in planning.plans_for(_selection(args))} if (
            args.task or args.problem or args.start_dir) else None
        if asked is not None and asked != {p.spec.task for p in plans}:
            raise UsageError(f"run {args.run_name} in {args.db} refines {', '.join(p.spec.task for p in plans)}; "
                             f"resume it with those tasks (or none named), or pick a new --run name")
        options = dict(stored, model=args.model or stored["model"], base_url=args.base_url or stored["base_url"])
    else:
        if not args.model:
            raise UsageError("pass --model NAME (the endpoint's model, e.g. gpt-4.1), or --run NAME of a stored run")
        plans = planning.plans_for(_selection(args))
        options = {"model": args.model, "base_url": args.base_url or os.environ.get("OPENAI_BASE_URL") or
                   DEFAULT_BASE_URL, "api_key_env": args.api_key_env, **DEFAULTS, "plans": planning.to_json(plans)}
    for k in DEFAULTS:
        if getattr(args, k) is not None:
            options[k] = getattr(args, k)
    name = args.run_name or time.strftime("refine-%Y%m%d-%H%M%S")
    client = ChatClient(options["base_url"], options["model"], _api_key(options), args.request_timeout, args.retries,
                        args.backoff, temperature=args.temperature, max_in_flight=args.max_requests or args.parallel)
    screener = Screener(args.db, args.workers, args.time_limit, args.memory_gb, sandboxed=sandbox_ready(args))
    store = store or RefineStore(args.db)
    store.save_run(name, options)  # the key's variable's name only
    say = (lambda s: None) if args.json else _progress
    if not args.json:
        _say(f"pkb refine: run {name}: {len(plans)} task(s), model {options['model']} at {client.url}, up to "
              f"{options['steps']} steps, target {options['target']:g}x (store {args.db})", flush=True)
    outcomes = refine_all(plans, LoopOptions(options["steps"], options["target"]), client, screener, store, name,
                          args.parallel, say)
    names = {p.spec.task: p.file_name for p in plans}
    best = {o.task: (o.best.candidate, names[o.task]) for o in outcomes if o.best}
    written = []
    if args.out:
        written = write_best(best, args.out)
    scores = _score(outcomes, args) if args.score else {}
    if args.json:
        _say(json.dumps({"run": name, "db": args.db, "out": written, "tasks": [_outcome_json(o, scores) for o in outcomes]},
                         indent=1))
    else:
        _summary(outcomes, scores, written, name)
    for o in outcomes:
        if o.error:
            _say(f"pkb refine: {o.task}: error: {o.error}", file=sys.stderr)
    if any(o.stopped == "error" for o in outcomes):
        return 3
    return 0 if all(o.stopped == "target" for o in outcomes) else 1


def _say(*parts, **kwargs) -> None:
    """print, with no secret value in what it prints (pkb/refine/redact.py): feedback and replies may hold one."""
    print(*(redact(p) for p in parts), **kwargs)


def _api_key(options: dict) -> str | None:
    register(options["api_key_env"])  # never printed nor stored, whatever the variable's name
    key = os.environ.get(options["api_key_env"])
    host = urllib.parse.urlsplit(options["base_url"]).hostname or ""
    if not key and host not in ("127.0.0.1", "localhost", "::1"):
        raise UsageError(f"no API key for {options['base_url']}: set ${options['api_key_env']} in the environment "
                         f"(or name another variable with --api-key-env)")
    return key


def _score(outcomes, args) -> dict:
    rows = [ScreenResult.from_json(o.best.result) for o in outcomes if o.best and o.best.result]  # from the store
    where = {}

    def started(row, nproc, backend):
        where[row.candidate] = {"nproc": nproc, "backend": backend}
        if not args.json:
            _say(f"  scoring {row.task} step file {os.path.basename(row.candidate)}: {nproc} ranks, {backend}",
                  flush=True)

    return {k: v.to_json() | where.get(k, {}) for k, v in batch.score(rows, args.db, on_start=started).items()}


def _progress(s) -> None:
    what = s.verdict if s.verdict != "malformed" else f"malformed reply ({s.stage})"
    if s.verdict == Verdict.REJECT and s.result and s.result.get("reasons"):
        what += f" at {s.stage}: {s.result['reasons'][0]['kind']}"
    elif s.speedup is not None:
        what += f", predicted {s.speedup:.2f}x"
    timing = f"request {s.request_s:.1f} s" + (f", screen {s.screen_s:.1f} s" if s.candidate else "")
    _say(f"  {s.task} step {s.step}: {what} ({timing})", flush=True)


def _summary(outcomes, scores: dict, written: list[str], name: str) -> None:
    for o in outcomes:
        b = o.best
        best = (f"best: step {b.step}, {b.verdict}" + (f" {b.speedup:.2f}x" if b.speedup is not None else "")
                + f" ({b.candidate})") if b else "no candidate passed"
        score = scores.get(b.candidate) if b else None
        hw = (f"; score ({score.get('backend', '?')}, {score.get('nproc', '?')} ranks): {score.get('status')}"
              + (f" {score['speedup']:.2f}x" if score.get("speedup") else "")) if score else ""
        _say(f"{o.task}: {len([s for s in o.steps if s.step > 0])} steps, stopped at {o.stopped}; {best}{hw}")
    for w in written:
        _say(f"wrote {w}")
    _say(f"transcript: pkb refine --show {name}; trajectory: pkb report --html report.html")


def _outcome_json(o, scores: dict) -> dict:
    b = o.best
    return {"task": o.task, "stopped": o.stopped, "error": o.error or None,
            "best": {"step": b.step, "verdict": b.verdict, "speedup": b.speedup, "candidate": b.candidate,
                     "score": scores.get(b.candidate)} if b else None,
            "steps": [{"step": s.step, "verdict": s.verdict, "stage": s.stage, "speedup": s.speedup,
                       "feedback": s.feedback, "screen_s": s.screen_s, "request_s": s.request_s,
                       "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
                       "candidate": s.candidate} for s in o.steps]}


def _show(store, name: str, as_json: bool) -> int:
    if store.run_options(name) is None:
        known = ", ".join(r for r, _ in store.runs()[-5:]) or "none"
        raise UsageError(f"no run {name!r} in {store.path} (latest: {known}); pass --db FILE or another name")
    steps = store.steps(name)
    if as_json:
        _say(json.dumps({"run": name, "steps": [dict(s.__dict__, result=None) for s in steps]}, indent=1))
        return 0
    for s in steps:
        tokens = f", {s.completion_tokens} tokens" if s.completion_tokens is not None else ""
        head = f"== {s.task} step {s.step}"
        if s.step == 0:
            _say(f"{head}: started from {s.candidate}")
        else:
            if s.step == 1:
                _say(f"== {s.task}: the task's prompt ({len(s.prompt)} characters; --dry-run prints it), first line: "
                      f"{s.prompt.splitlines()[0] if s.prompt else ''}")
            _say(f"{head}: the model's reply ({s.request_s:.1f} s{tokens})\n{s.reply.rstrip()}")
        screen = f", screen {s.screen_s:.1f} s" if s.candidate else ""
        _say(f"-- feedback ({s.verdict}{screen})\n{s.feedback.rstrip()}\n")
    return 0
