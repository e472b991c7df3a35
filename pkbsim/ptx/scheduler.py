"""Runs a grid: CTAs are batched into lane groups, a bounded set of groups is resident, and resident
groups take turns in slices of instructions (so a CTA spinning on another CTA's flag lets it run).

This is the seam for the multi-rank world: a slice boundary is where a rank's device work can yield to
other ranks, and `Counters.stores` tells a spin detector whether anything changed during a slice.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InstructionBudget
from .simt import LaneGroup

SLICE = 1 << 14


@dataclass
class Counters:
    warp_instructions: int = 0
    stores: int = 0


def cta_order(grid: tuple[int, int, int]):
    gx, gy, gz = grid
    return [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]


def run_grid(kernel, launch, lanes_per_group: int = 4096, resident_groups: int = 8,
             max_warp_instructions: int = 1 << 31) -> None:
    ctas = cta_order(launch.grid)
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    per_cta = -(-threads // 32) * 32
    batch = max(1, min(lanes_per_group // per_cta, len(ctas)))
    waiting = [ctas[i:i + batch] for i in range(0, len(ctas), batch)]
    waiting.reverse()
    resident: list[LaneGroup] = []
    while waiting or resident:
        while waiting and len(resident) < resident_groups:
            resident.append(LaneGroup(kernel, launch, waiting.pop()))
        for group in list(resident):
            if group.run(SLICE):
                resident.remove(group)
        if launch.counters.warp_instructions > max_warp_instructions:
            raise InstructionBudget(f"kernel {kernel.name} ran past {max_warp_instructions} warp-instructions "
                             f"(an endless loop or a spin that never sees its flag?) near {resident[0].where()}")
