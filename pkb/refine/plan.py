"""A run's tasks from the user's names (suite tasks, ParallelKernelBench problems, a kernelgen folder), and a
stored run's tasks back from the store, as TaskPlans."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from pkb.errors import UsageError
from pkb.prompt import build
from pkb.refine.kernelgen import file_name, start_files
from pkb.refine.loop import TaskPlan
from pkb.refine.screening import ScreenSpec
from pkb.resolve import default_topology, load, parallelkernelbench_tasks, pick_world_size, task_or_usage
from pkbsim import MARGIN, RUN_TIMEOUT_S
from tasks.parallelkernelbench.naming import DEFAULT_DTYPE, Checkout


@dataclass(frozen=True)
class Selection:
    """What the user asked to refine and how to screen it."""
    tasks: tuple[str, ...] = ()          # suite slugs or ids
    problems: tuple[str, ...] = ()       # ParallelKernelBench problem ids (with its root), or "all"
    parallelkernelbench_root: str | None = None
    parallelkernelbench_dtype: str = DEFAULT_DTYPE
    start_dir: str | None = None         # kernelgen output folder: each file is its problem's step 0
    backend: str = "cuda"
    topology: str | None = None
    world_size: int | None = None
    seed: int | None = None
    margin: float = MARGIN
    timeout: float = RUN_TIMEOUT_S
    cost: bool = True


def plans_for(sel: Selection) -> list[TaskPlan]:
    root = sel.parallelkernelbench_root
    problem_ids = parallelkernelbench_tasks(Checkout(root, sel.parallelkernelbench_dtype) if root else None)
    if sel.problems and not sel.parallelkernelbench_root:
        raise UsageError("--problem needs --pkb-root DIR (a ParallelKernelBench checkout)")
    chosen: list[tuple[str, str | None, str]] = []  # (slug, start file, backend)
    for key in sel.tasks:
        chosen.append((task_or_usage(key).slug, None, sel.backend))
    for p in sel.problems:
        ids = sorted(problem_ids) if p == "all" else [_problem_id(p, problem_ids, sel.parallelkernelbench_root)]
        chosen += [(problem_ids[i], None, sel.backend) for i in ids]
    if sel.start_dir:
        chosen += [(f.task, f.path, f.backend or sel.backend) for f in start_files(sel.start_dir, problem_ids)]
    if not chosen:
        raise UsageError("nothing to refine: pass --task SLUG, --pkb-root DIR --problem ID, or --from DIR")
    seed = sel.seed if sel.seed is not None else int.from_bytes(os.urandom(4), "little")
    plans, seen = [], set()
    for slug, start, backend in chosen:
        if slug in seen:
            raise UsageError(f"{slug} is asked for twice (a run refines each task once); drop one")
        seen.add(slug)
        task = task_or_usage(slug)
        topo = load(sel.topology or default_topology(task))
        spec = ScreenSpec(slug, pick_world_size(task, sel.world_size, topo.num_gpus), topo.name, seed, sel.margin,
                          sel.timeout, sel.cost,
                          sel.parallelkernelbench_root and os.path.abspath(sel.parallelkernelbench_root),
                          sel.parallelkernelbench_dtype)
        plans.append(TaskPlan(spec, build(task, backend, topo), file_name(task, backend), start))
    return plans


def _problem_id(p: str, problem_ids: dict[int, str], root: str) -> int:
    if not p.isdigit() or int(p) not in problem_ids:
        raise UsageError(f"--problem {p}: {root} has no such problem (it has {min(problem_ids)}-{max(problem_ids)}); "
                         f"pass a number of its reference/<id>_<name>.py files, or all")
    return int(p)


# The refine store's keys for a ParallelKernelBench checkout in a plan's spec, as runs were stored before the
# fields were spelled out: stored runs still resume, and the stored JSON keeps its keys.
_STORED_KEYS = {"parallelkernelbench_root": "pkb_root", "parallelkernelbench_dtype": "pkb_dtype"}
_FIELDS = {stored: name for name, stored in _STORED_KEYS.items()}


def to_json(plans: list[TaskPlan]) -> list[dict]:
    rows = [asdict(p) for p in plans]
    for r in rows:
        r["spec"] = {_STORED_KEYS.get(k, k): v for k, v in r["spec"].items()}
    return rows


def from_json(rows: list[dict]) -> list[TaskPlan]:
    """A stored run's plans (ParallelKernelBench checkouts registered again, so their tasks resolve)."""
    specs = [ScreenSpec(**{_FIELDS.get(k, k): v for k, v in r["spec"].items()}) for r in rows]
    for root, dtype in {(s.parallelkernelbench_root, s.parallelkernelbench_dtype) for s in specs
                        if s.parallelkernelbench_root}:
        parallelkernelbench_tasks(Checkout(root, dtype))
    return [TaskPlan(s, r["prompt"], r["file_name"], r["start_from"]) for s, r in zip(specs, rows)]
