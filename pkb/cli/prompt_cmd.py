"""`pkb prompt`: a task as a self-contained prompt for a code model."""
from __future__ import annotations

import json

from pkb.prompt import GUIDANCE, build
from pkb.resolve import load, task_or_usage


def add_parser(sub) -> None:
    p = sub.add_parser("prompt", help="a task as a self-contained prompt for a code model",
                       description="Print a task as a prompt: what to write, the reference and its inputs, sizes, "
                                   "world sizes, tolerances and the machine. Exit: 0, 2 bad usage.")
    p.add_argument("--task", required=True, help="task slug or id")
    p.add_argument("--backend", choices=sorted(GUIDANCE), default="cuda", help="what the solution should use")
    p.add_argument("--topology", default="hgx-h100", metavar="NAME", help="the machine the solution runs on")
    p.add_argument("--json", action="store_true", help="print {task, backend, prompt} as JSON")
    p.set_defaults(run=run)


def run(args) -> int:
    task = task_or_usage(args.task)
    text = build(task, args.backend, load(args.topology))
    print(json.dumps({"task": task.slug, "backend": args.backend, "prompt": text}, indent=1) if args.json else text)
    return 0
