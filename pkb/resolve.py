"""The user's names made into things: a topology, a world size, a ParallelKernelBench checkout's tasks.

Shared by the commands and the batch (`pkb screen`, `pkb run`, `pkb predict`, ...): what cannot be resolved
becomes one UsageError naming the problem and the fix. `pkb score` names its task here too and must not load
the simulator, so pkbsim is imported only by the functions that need it; tasks' registry (and torch with it)
only when a task is looked up, since every command's parser imports this module (`pkb --help`).
"""
from __future__ import annotations

import os

from pkb.errors import UsageError
from tasks.parallelkernelbench.naming import DEFAULT_DTYPE, Checkout, parallelkernelbench_task_for

DEFAULT_TOPOLOGY = "hgx-h100"


def load(name: str, nodes: int | None = None):
    """A topology for a CLI command: TopologyError becomes a one-line usage error."""
    from pkbsim import TopologyError, load_topology

    try:
        return load_topology(name, nodes)
    except TopologyError as e:
        raise UsageError(str(e)) from None


def default_topology(task) -> str:
    """hgx-h100, or h100-ib-2node for a task of more than 8 ranks."""
    return DEFAULT_TOPOLOGY if task.supports(8) or task.supports(2) else "h100-ib-2node"


def pick_world_size(task, requested: int | None, gpus: int) -> int:
    if requested is not None:
        if requested < 1 or not task.supports(requested):
            raise UsageError(f"{task.slug} does not run at world size {requested} (it needs "
                             f"{task.world_sizes.describe()}); pick another --world-size")
        if requested > gpus:
            raise UsageError(f"--world-size {requested} exceeds the topology's {gpus} GPUs; pick a larger "
                             f"--topology (pkb topo list)")
        return requested
    for n in (8, 4, 2, *range(9, gpus + 1), 1):
        if n <= gpus and task.supports(n):
            return n
    raise UsageError(f"{task.slug} needs {task.world_sizes.describe()} ranks; the topology has {gpus} GPUs: "
                     f"pick a larger --topology")


def checkout_of(args) -> Checkout | None:
    """The ParallelKernelBench checkout a command's --pkb-root and --pkb-dtype name, or None."""
    root = getattr(args, "parallelkernelbench_root", None)
    return Checkout(root, getattr(args, "parallelkernelbench_dtype", DEFAULT_DTYPE)) if root else None


def parallelkernelbench_tasks(checkout: Checkout | None, known: dict | None = None,
                              simulated: bool = True) -> dict[int, str]:
    """Register the ParallelKernelBench checkout's problems as tasks (its problem id -> slug; none without a
    checkout); a bad checkout is a usage error. `simulated`: as the screen runs them (pkbsim's budgets and
    per-rank modules), else as a scoring rank does (`pkb score`, which needs their names and world sizes only)."""
    from tasks.parallelkernelbench.checkout import CheckoutError, register_checkout
    if checkout is None:
        return {}
    try:
        if not simulated:
            return register_checkout(checkout, known)
        from pkbsim import register_parallelkernelbench_tasks
        return register_parallelkernelbench_tasks(checkout.root, known, checkout.dtype)
    except CheckoutError as e:
        raise UsageError(str(e)) from None


def task_or_usage(key: str):
    """The task for a slug or id; an unknown one is a usage error (tasks, screen, score, prompt)."""
    from tasks.registry import TaskError, get  # torch (the module docstring says why)
    try:
        return get(key)
    except TaskError as e:
        raise UsageError(str(e)) from None


def task_of(args, simulated: bool = True):
    """The task named by --task, or (with --pkb-root) the ParallelKernelBench problem the candidate's file name
    names; `simulated` as for parallelkernelbench_tasks."""
    problem_ids = parallelkernelbench_tasks(checkout_of(args), simulated=simulated)
    if args.task:
        return task_or_usage(args.task)
    slug = parallelkernelbench_task_for(args.candidate, problem_ids) if problem_ids else None
    if slug is None and problem_ids:
        raise UsageError(f"{os.path.basename(args.candidate)} names no problem of the ParallelKernelBench checkout "
                         f"{args.parallelkernelbench_root}; pass --task SLUG")
    if slug is None:
        raise UsageError("pass --task SLUG, or --pkb-root DIR for a file named <id>_<name>[_<backend>].py")
    return task_or_usage(slug)
