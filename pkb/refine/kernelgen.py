"""ParallelKernelBench's kernelgen layout: a folder of `<id>_<name>_<backend>.py` files, one per problem. A run
can start from such a folder (each file is its problem's step 0) and writes its best candidates into one,
so `pkb run --pkb-root` and ParallelKernelBench's own harness read them as they read kernelgen's output."""
from __future__ import annotations

import os
import shutil
import warnings
from dataclasses import dataclass

from pkb.errors import UsageError
from pkb.prompt import GUIDANCE
from tasks.parallelkernelbench.naming import PairingWarning, parallelkernelbench_task_for, problem_key


@dataclass(frozen=True)
class StartFile:
    task: str             # task slug
    path: str
    backend: str | None   # from the name's suffix, where it is one of pkb prompt's backends


def file_name(task, backend: str) -> str:
    """`<id>_<name>_<backend>.py`: a ParallelKernelBench problem's own id and name, or a suite task's id and
    slug."""
    if task.slug.startswith("pkb") and problem_key(task.slug[3:]):
        return f"{task.slug[3:]}_{backend}.py"
    return f"{task.id}_{task.slug}_{backend}.py"


def start_files(folder: str, problem_ids: dict[int, str]) -> list[StartFile]:
    """The folder's kernelgen files paired with tasks (ParallelKernelBench problems with --pkb-root, else the
    suite's tasks by id and name); a file that names none is a usage error naming it."""
    from tasks.registry import all_tasks  # torch: not for `pkb --help`, which imports this module

    if not os.path.isdir(folder):
        raise UsageError(f"--from {folder}: no such folder; pass a folder of <id>_<name>_<backend>.py files")
    by_id = {t.id: t.slug for t in all_tasks()}
    out = []
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".py") or f.startswith("_"):
            continue
        path = os.path.abspath(os.path.join(folder, f))
        key = problem_key(f[:-3])
        backend = f[:-3].rsplit("_", 1)[-1] if "_" in f else None
        backend = backend if backend in GUIDANCE else None
        slug = None
        if key and problem_ids:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PairingWarning)
                slug = parallelkernelbench_task_for(path, problem_ids)
        elif key and key[0] in by_id and key[1].startswith(by_id[key[0]]):
            slug = by_id[key[0]]
        if slug is None:
            raise UsageError(f"--from {folder}: {f} names no task (kernelgen names files <id>_<name>_<backend>.py; "
                             f"pass --pkb-root DIR for ParallelKernelBench problems)")
        out.append(StartFile(slug, path, backend))
    if not out:
        raise UsageError(f"--from {folder}: no .py files there; pass kernelgen's output folder")
    return out


def write_best(best: dict[str, tuple[str, str]], folder: str) -> list[str]:
    """Copy each task's best candidate (task -> (file, kernelgen name)) into `folder`; the paths written."""
    os.makedirs(folder, exist_ok=True)
    written = []
    for src, name in best.values():
        dst = os.path.join(folder, name)
        shutil.copyfile(src, dst)
        written.append(dst)
    return written
