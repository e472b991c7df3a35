"""`pkb tasks`: list the benchmark's tasks, show one, validate them."""
from __future__ import annotations

import inspect
import json
import shutil
import sys


from pkb.errors import UsageError
from pkb.resolve import task_or_usage


def add_parser(sub) -> None:
    p = sub.add_parser("tasks", help="list, show and validate benchmark tasks",
                       description="List tasks (default), `show SLUG`, or `validate SLUG|--all`. "
                                   "Exit: 0 ok, 1 a validation check failed, 2 bad usage.")
    p.add_argument("action", nargs="?", choices=["list", "show", "validate"], default="list",
                   help="what to do (default list)")
    p.add_argument("slug", nargs="?", help="task slug or id (show, validate)")
    p.add_argument("--category", help="list only this category")
    p.add_argument("--all", action="store_true", help="validate every task")
    p.add_argument("--world-sizes", default="2,4,8", help="validate at these world sizes (default 2,4,8)")
    p.add_argument("--no-full", action="store_true", help="validate: skip the full-size shape run")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=run)


def _all():
    from tasks.registry import TaskError, all_tasks  # torch: not at module level, which `pkb --help` imports
    try:
        return all_tasks()
    except TaskError as e:
        raise UsageError(f"a task module is broken: {e}") from None


def run(args) -> int:
    if args.action == "list":
        return _list(args)
    if args.action == "show":
        if not args.slug:
            raise UsageError("usage: pkb tasks show SLUG")
        return _show(args)
    return _validate(args)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "\u2026"


def _fit(rows: list[tuple[str, ...]], columns: int) -> list[str]:
    """The table in `columns` characters, a line a task: the world sizes cut at 14 characters and the origin
    to what is left (at least 10), each with an ellipsis (`show` and --json give them whole)."""
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    widths[3] = min(widths[3], 14)
    rest = max(10, columns - sum(widths) - 4)
    return [" ".join(_cut(c, w).ljust(w) for c, w in zip(r[:4], widths)) + " " + _cut(r[4], rest) for r in rows]


def _list(args) -> int:
    from tasks.api import CATEGORIES  # (torch, as the registry above)
    if args.category and args.category not in CATEGORIES:
        raise UsageError(f"unknown category {args.category!r}; choose one of {', '.join(CATEGORIES)}")
    tasks = [t for t in _all() if not args.category or t.category == args.category]
    if args.json:
        print(json.dumps({"tasks": [t.summary() for t in tasks]}, indent=1))
        return 0
    # fits the terminal: the origin is cut with an ellipsis (`show` and --json give it whole)
    rows = [("id", "slug", "category", "world sizes", "origin")]
    rows += [(str(t.id), t.slug, t.category, t.world_sizes.describe(), t.origin) for t in tasks]
    for line in _fit(rows, shutil.get_terminal_size().columns):
        print(line)
    print(f"{len(tasks)} tasks")
    return 0


def _show(args) -> int:
    t = task_or_usage(args.slug)
    doc = t.summary() | {"reference_source": inspect.getsource(t.reference),
                         "make_inputs_source": inspect.getsource(t.make_inputs)}
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{t.id} {t.slug}: {t.title}\n  category: {t.category}\n  origin: {t.origin}\n"
          f"  world sizes: {t.world_sizes.describe()}\n  signature: {t.signature}\n  sizes: {t.sizes}")
    for o in doc["outputs"]:
        print(f"  output {o['name']}: {o['dtype']}, rtol={o['rtol']:g}, atol={o['atol']:g}, NaN: {o['nan']}")
    print("\n" + doc["make_inputs_source"] + "\n" + doc["reference_source"])
    return 0


def _validate(args) -> int:
    from pkbsim import validate_task  # the simulated world (torch): not for `pkb --help`
    try:
        sizes = tuple(int(x) for x in args.world_sizes.split(","))
    except ValueError:
        raise UsageError("--world-sizes takes integers separated by commas, e.g. 2,4,8") from None
    if args.all == bool(args.slug):
        raise UsageError("usage: pkb tasks validate SLUG, or pkb tasks validate --all")
    tasks = _all() if args.all else [task_or_usage(args.slug)]
    report, failed = [], 0
    for i, t in enumerate(tasks, 1):
        checks = validate_task(t, sizes, full=not args.no_full)
        bad = [c for c in checks if not c.ok]
        failed += bool(bad)
        report.append({"slug": t.slug, "ok": not bad, "checks": [c.to_json() for c in checks]})
        if not args.json:
            print(f"[{i}/{len(tasks)}] {t.slug}: {'ok' if not bad else 'FAILED'}", file=sys.stderr)
            for c in checks if len(tasks) == 1 else bad:
                where = f" @{c.world_size}" if c.world_size else ""
                print(f"  {'ok  ' if c.ok else 'FAIL'} {c.name}{where}" + (f": {c.message}" if c.message else ""))
    if args.json:
        print(json.dumps({"tasks": report, "failed": failed}, indent=1))
    elif len(tasks) > 1:
        print(f"{len(tasks) - failed} of {len(tasks)} tasks valid")
    return 1 if failed else 0
