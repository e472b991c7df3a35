"""A run's tasks from the user's names (suite tasks, ParallelKernelBench problems, a kernelgen folder), and a
stored run's tasks back from the store, as TaskPlans."""
from __future__ import annotations

import argparse
import os
from dataclasses import asdict, dataclass

from pkb.errors import UsageError
from pkb.refine.loop import TaskPlan
from pkb.refine.screening import ScreenSpec
from pkbsim.screen.defaults import MARGIN, PKB_DTYPE, RUN_TIMEOUT_S


@dataclass(frozen=True)
class Selection:
    """What the user asked to refine and how to screen it."""
    tasks: tuple[str, ...] = ()          # suite slugs or ids
    problems: tuple[str, ...] = ()       # PKB problem ids (with pkb_root), or "all"
    pkb_root: str | None = None
    pkb_dtype: str = PKB_DTYPE
    start_dir: str | None = None         # kernelgen output folder: each file is its problem's step 0
    backend: str = "cuda"
    topology: str | None = None
    world_size: int | None = None
    seed: int | None = None
    margin: float = MARGIN
    timeout: float = RUN_TIMEOUT_S
    cost: bool = True


def plans_for(sel: Selection) -> list[TaskPlan]:
    from pkb.prompt import build
    from pkb.refine.kernelgen import file_name, start_files
    from pkb.resolve import default_topology, load, parallelkernelbench_tasks, pick_world_size, task_or_usage

    problem_ids = parallelkernelbench_tasks(argparse.Namespace(pkb_root=sel.pkb_root, pkb_dtype=sel.pkb_dtype))
    if sel.problems and not sel.pkb_root:
        raise UsageError("--problem needs --pkb-root DIR (a ParallelKernelBench checkout)")
    chosen: list[tuple[str, str | None, str]] = []  # (slug, start file, backend)
    for key in sel.tasks:
        chosen.append((task_or_usage(key).slug, None, sel.backend))
    for p in sel.problems:
        ids = sorted(problem_ids) if p == "all" else [_problem_id(p, problem_ids, sel.pkb_root)]
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
                          sel.timeout, sel.cost, sel.pkb_root and os.path.abspath(sel.pkb_root), sel.pkb_dtype)
        plans.append(TaskPlan(spec, build(task, backend, topo), file_name(task, backend), start))
    return plans


def _problem_id(p: str, problem_ids: dict[int, str], root: str) -> int:
    if not p.isdigit() or int(p) not in problem_ids:
        raise UsageError(f"--problem {p}: {root} has no such problem (it has {min(problem_ids)}-{max(problem_ids)}); "
                         f"pass a number of its reference/<id>_<name>.py files, or all")
    return int(p)


def to_json(plans: list[TaskPlan]) -> list[dict]:
    return [asdict(p) for p in plans]


def from_json(rows: list[dict]) -> list[TaskPlan]:
    """A stored run's plans (ParallelKernelBench checkouts registered again, so their tasks resolve)."""
    from pkb.resolve import parallelkernelbench_tasks

    for root, dtype in {(r["spec"]["pkb_root"], r["spec"]["pkb_dtype"]) for r in rows if r["spec"]["pkb_root"]}:
        parallelkernelbench_tasks(argparse.Namespace(pkb_root=root, pkb_dtype=dtype))
    return [TaskPlan(ScreenSpec(**r["spec"]), r["prompt"], r["file_name"], r["start_from"]) for r in rows]
