"""Which task each candidate file is for, in a batch.

A file named after a task (`all_reduce.py`, `all_reduce__variant.py`, `all_reduce.variant.py`) is for that
task; in a ParallelKernelBench-style `solutions_*` folder, `<id>_<name>_<backend>.py` is for a
ParallelKernelBench problem when its checkout is loaded (`--pkb-root`), paired by name as well as number
(tasks/parallelkernelbench/naming.py). With exactly one `--tasks` entry every file is for that task.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from tasks.parallelkernelbench.naming import parallelkernelbench_task_for


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
