"""Symmetric allocations and the per-world registry of them, shared by the handle (pkbsim/symm/handle.py)
and the device side (pkbsim/device: memory map, protocol, lowering), which both import this module and not
each other for it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from pkbsim.world.comms import is_fake


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


def storage_key(t: torch.Tensor) -> int:
    """Identity of a tensor's memory: its storage address; in a shape run, where every fake storage is at
    address 0, the storage object itself (views made with set_ share it)."""
    try:
        st = t.untyped_storage()
        return st._cdata if is_fake(t) else st.data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(t)


def state(world) -> SymmState:
    if not hasattr(world, "symm"):
        world.symm = SymmState()
    return world.symm
