"""Symmetric allocations and the state of symmetric memory per world (the registry of allocations) and per
rank, shared by the handle (pkbsim/symm/handle.py) and the device side (pkbsim/device: memory map, protocol,
lowering; pkbsim/cuda: the kernels' address space), which all import this module and not each other for it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from pkbsim.world.comms import storage_key  # noqa: F401 - symm's and the device side's key
from pkbsim.world.plugins import RankState, WorldState


@dataclass(eq=False)
class Allocation:
    rank: int
    tensor: torch.Tensor
    pad: torch.Tensor  # uint32 words
    # per slot: (signalling rank, group name, clock of the put) and (writing rank, clock, site) of host writes
    signals: dict[int, tuple[int, str, tuple, str]] = field(default_factory=dict)
    host_writes: dict[int, tuple[int, tuple, str]] = field(default_factory=dict)


class SymmState:
    """Per-world registry: storage key -> allocation, pad storage key -> allocation."""

    def __init__(self):
        self.by_storage: dict[int, Allocation] = {}
        self.by_pad: dict[int, Allocation] = {}
        self.handles: dict[tuple[int, str], object] = {}  # (rank, group name) -> its SimSymmetricMemory


@dataclass
class SymmRank:
    """A rank's own: how many handle barriers it ran (ids in the trace), its workspace buffer per group."""
    barriers: int = 0
    workspaces: dict[str, torch.Tensor] = field(default_factory=dict)


WORLD_STATE = WorldState(lambda world: SymmState())
RANK_STATE = RankState(SymmRank)


def state(world) -> SymmState:
    return WORLD_STATE.of(world)
