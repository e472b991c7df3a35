"""The rank-to-node layout a job over several nodes must share with the task it scores."""
from __future__ import annotations

from pkb.errors import UsageError


def check_node_layout(task, preset: str, nproc_per_node: int) -> None:
    """Inter-node tasks place `gpus_per_node` ranks on each node (node-major, local rank = GPU index);
    a job over several nodes must put exactly that many on each, or the task's "nodes" are not the real ones."""
    g = task.sizes[preset].get("gpus_per_node")
    if g is not None and g != nproc_per_node:
        raise UsageError(f"task {task.slug} places {g} ranks on each node at its {preset} size, not "
                         f"{nproc_per_node}; pass --nproc-per-node {g}")
