"""Which task each candidate file is for, in a batch.

A file named after a task (`all_reduce.py`, `all_reduce__variant.py`, `all_reduce.variant.py`) is for that
task; in a ParallelKernelBench-style `solutions_*` folder, `<id>_<name>_<backend>.py` is for a
ParallelKernelBench problem when its checkout is loaded (`--pkb-root`), paired by name as well as number:
solution trees made before a renumbering carry stale numbers (ParallelKernelBench's first commit numbers its
solutions from 34 on one above its own reference/), and renamed problems carry stale names. With exactly
one `--tasks` entry every file is for that task.
"""
from __future__ import annotations

import ast
import inspect
import os
import warnings
from dataclasses import dataclass

from tasks.parallelkernelbench.checkout import problem_key


class PairingWarning(UserWarning):
    """A file whose number and name point at different problems (paired, and said which way)."""


@dataclass(frozen=True)
class Job:
    task: str        # task slug
    candidate: str   # absolute path


def candidate_files(paths: list[str]) -> tuple[list[str], list[str]]:
    """The .py files named by paths (folders expanded, one level), and the paths that do not exist."""
    files, missing = [], []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".py") and not f.startswith("_"))
        elif os.path.isfile(p):
            files.append(p)
        else:
            missing.append(p)
    return [os.path.abspath(f) for f in files], missing


def task_for(path: str, slugs: set[str], problem_ids: dict[int, str]) -> str | None:
    stem = os.path.basename(path)[:-3]
    for cut in (stem, stem.split("__")[0], stem.split(".")[0]):
        if cut in slugs:
            return cut
    return parallelkernelbench_task_for(path, problem_ids) if problem_ids else None


def parallelkernelbench_task_for(path: str, problem_ids: dict[int, str]) -> str | None:
    """The ParallelKernelBench problem of `<id>_<name>[_<backend>].py`: the one number and name agree on.
    Otherwise, with a PairingWarning: the one of them that names a problem; when they name two, the one whose
    reference takes the parameters of the file's `solution` (the name's when both or neither do)."""
    key = problem_key(os.path.basename(path)[:-3])
    if key is None:
        return None
    pid, rest = key
    names = {_name(slug): slug for slug in problem_ids.values()}
    by_name = names.get(rest) or names.get(rest.rsplit("_", 1)[0])
    by_number = problem_ids.get(pid)
    if by_name == by_number:
        return by_name
    if by_number is None:
        chosen, why = by_name, f"its number matches no problem of the checkout; paired by name with {by_name}"
    elif by_name is None:
        chosen, why = by_number, f"its name matches no problem of the checkout; paired by number with {by_number}"
    else:
        params = _solution_params(path)
        chosen = by_number if params == _params(by_number) != _params(by_name) else by_name
        why = (f"its number is {by_number}, its name {by_name}; paired with " + chosen +
               (" (its solution takes that reference's parameters)" if chosen == by_number else " by name"))
    warnings.warn(PairingWarning(f"{os.path.basename(path)}: {why}"), stacklevel=2)
    return chosen


def _name(slug: str) -> str:
    return problem_key(slug[len("pkb"):])[1]


def _params(slug: str) -> list[str]:
    from tasks.registry import get
    return list(inspect.signature(get(slug).reference).parameters)


def _solution_params(path: str) -> list[str] | None:
    """The parameter names of the file's top-level `def solution`, read without running the file."""
    try:
        with open(path) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "solution":
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return None


def pair(files: list[str], slugs: set[str], only: list[str] | None = None,
         problem_ids: dict[int, str] | None = None) -> tuple[list[Job], list[str]]:
    """Jobs for the files, and one message per file that names no known task."""
    jobs, unknown = [], []
    for f in files:
        slug = only[0] if only and len(only) == 1 else task_for(f, slugs, problem_ids or {})
        if slug is None:
            unknown.append(f"{os.path.basename(f)}: names no task (call it <task_slug>.py or "
                           f"<task_slug>__<variant>.py, or pass --tasks SLUG)")
        elif not only or slug in only:
            jobs.append(Job(slug, f))
    return jobs, unknown
