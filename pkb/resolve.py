"""The user's names made into things: a topology, a world size, a ParallelKernelBench checkout's tasks.

Shared by the commands and the batch (`pkb screen`, `pkb run`, `pkb predict`, ...): what cannot be resolved
becomes one UsageError naming the problem and the fix.
"""
from __future__ import annotations

from pkb.errors import UsageError

DEFAULT_TOPOLOGY = "hgx-h100"


def load(name: str, nodes: int | None = None):
    """A topology for a CLI command: TopologyError becomes a one-line usage error."""
    from pkbsim.timing.schema import TopologyError
    from pkbsim.timing.topology import load_topology

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


def pkb_tasks(args, known: dict | None = None) -> dict[int, str]:
    """Register the checkout's problems as tasks (PKB id -> slug); a bad checkout is a usage error."""
    from pkbsim.screen.pkb_interop import PkbCheckoutError, register_pkb_tasks
    if not getattr(args, "pkb_root", None):
        return {}
    try:
        return register_pkb_tasks(args.pkb_root, known, getattr(args, "pkb_dtype", "bfloat16"))
    except PkbCheckoutError as e:
        raise UsageError(str(e)) from None
