"""Running an inline-CUDA kernel (PTX interpreter) on a simulated rank.

Blocks are lane groups that take turns in slices (pkbsim.ptx.scheduler's model). A kernel that polls
memory runs one block at a time, in launch order, as the Triton path runs programs: when every resident
block spins on memory that did not change during a round, the rank blocks in the world's wait-for check
until a peer writes what it polls (pkbsim.device.spin.block_on), so a wait nothing satisfies becomes a
deadlock report naming the polled address and the CUDA line. Only when the whole world is stuck does a
later block of the launch start: the kernel then relies on co-residency, which is reported. A
cooperative launch (cudaLaunchCooperativeKernel) guarantees co-residency: all its blocks are resident.
Each block runs on its own clock thread, forked from the rank at its start and joined back at the end of
the launch, so the race detector sees blocks as unordered unless they synchronise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from pkbsim.device.ir import Event
from pkbsim.device.kernel_report import FlagChains, KernelWork, report_launch
from pkbsim.device.protocol import device_state, kernel_end_fence
from pkbsim.device.ptx_memory import KernelObserver
from pkbsim.device.spin import block_on
from pkbsim.device.spin_handoff import kernel_ended
from pkbsim.ptx.scheduler import SLICE, cta_order
from pkbsim.ptx.simt import LaneGroup
from pkbsim.world.world import SimAbort

# lanes a group of blocks runs in lockstep (numpy vectors of this length: the interpreter's cost per instruction
# is mostly per vector, so long ones amortise it), and lanes resident at once (their registers are in memory
# together, on every rank)
LANES_PER_GROUP = 32768
RESIDENT_LANES = 65536


@dataclass
class KernelRun:
    """One launch on one rank: its polls in the current round, its traffic, co-residency notes."""
    name: str
    site: str
    grid: tuple[int, int, int]
    polls: dict = field(default_factory=dict)
    poll_site: str = ""
    work: KernelWork = field(default_factory=KernelWork)
    chains: FlagChains = field(default_factory=FlagChains)
    co_resident: list[str] = field(default_factory=list)
    blocks: dict = field(default_factory=dict)  # lane group -> its first block

    def where(self, g) -> str:
        return f"{self.name}[block {_fmt(self.blocks.get(id(g), (0, 0, 0)), self.grid)}]"


def _fmt(block, grid) -> str:
    dims = 3 if grid[2] > 1 else 2 if grid[1] > 1 else 1
    return ",".join(map(str, block[:dims]))


def _schedule(ctx, run: KernelRun, cooperative: bool, clocks):
    def schedule(kernel, launch) -> None:
        polling = any(d.poll_loop for d in kernel.code)
        ctas = cta_order(launch.grid)
        per_cta = -(-(launch.block[0] * launch.block[1] * launch.block[2]) // 32) * 32
        batch = 1 if polling else max(1, min(LANES_PER_GROUP // per_cta, len(ctas)))
        waiting = [ctas[i:i + batch] for i in range(0, len(ctas), batch)][::-1]
        limit = len(waiting) if cooperative else 1 if polling else max(1, RESIDENT_LANES // (batch * per_cta))
        resident: list[LaneGroup] = []
        threads: dict[int, int] = {}  # lane group -> its clock thread (pkbsim.world.clocks)
        while waiting or resident:
            while waiting and len(resident) < limit:
                group = LaneGroup(kernel, launch, waiting[-1])
                run.blocks[id(group)] = waiting.pop()[0]
                with ctx.world.lock:
                    threads[id(group)] = clocks.start(len(threads))
                resident.append(group)
            if ctx.world.failed:
                raise SimAbort("simulated world aborted")
            stores, progressed = launch.counters.stores, False
            for group in list(resident):
                with clocks.running(threads[id(group)]):
                    done = group.run(SLICE)
                if done:
                    resident.remove(group)
                    progressed = True
                elif not group.spun:
                    progressed = True
            if progressed or launch.counters.stores != stores:
                run.polls.clear()  # polls since the last progress: lanes set aside while spinning poll too
                continue
            if not any(p.repeats for p in run.polls.values()):
                # no address was read twice to the same value yet: the lanes moved on from wait to wait (one
                # thread waiting for each peer's flag in turn, each already set), which is progress, not a spin
                # (the polls are kept: a re-read in the next round is one)
                continue
            where = run.where(resident[0])
            spun_on = dict(sorted(run.polls.items(), key=lambda kv: kv[1].repeats == 0))  # re-read words named first
            escaped = block_on(ctx, spun_on, run.poll_site, where, lambda: bool(waiting))
            run.polls.clear()
            for group in resident:  # memory changed: every spinning lane re-reads it
                group.parked[:] = False
            if escaped:
                limit += 1
                run.co_resident.append(f"{where} waited until {run.name}[block {_fmt(waiting[-1][0], run.grid)}] ran")
    return schedule


def launch(ctx, module, kernel: str, name: str, grid, block, params: bytes, shared_bytes: int, memory,
           site: str, cooperative: bool = False) -> None:
    """Run `kernel` of `module` on the calling rank; `memory` maps every address it may touch."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    run = KernelRun(name, site, g)
    run.work.threads = math.prod((block,) if isinstance(block, int) else tuple(block))
    device_state(ctx.world).log.append(Event("kernel", ctx.rank, site, name, value=g[0] * g[1] * g[2]))
    clocks = ctx.world.clocks.kernel(ctx.rank)
    try:
        counters = module.launch_raw(kernel, g, block, params, shared_bytes, memory=memory,
                                     observer=KernelObserver(ctx, run), schedule=_schedule(ctx, run, cooperative, clocks))
        run.work.warp_instructions = counters.warp_instructions
        run.work.reads_grid_size = module.kernel(kernel).reads_grid_size
    finally:
        kernel_ended(ctx)
        with ctx.world.lock:
            kernel_end_fence(ctx, clocks, site, name)
            clocks.finish()
    report_launch(ctx, name, site, g[0] * g[1] * g[2], "block", run.work, run.co_resident, "cuda")
