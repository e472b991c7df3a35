"""Symmetric memory as a plug-in of the simulated world (pkbsim/world/plugins.py).

For a run it puts torch's symm_mem API (api.py) and CPU kernels for its ops (ops.py) in place; on each
tensor op of a rank whose ops mode is on, it sees the host's accesses to symmetric buffers (ordered
against the peers' device code: lower_symm), writes to signal pads (a reset racing with a peer's signal)
and the bytes the op moves to or from a peer's buffer (the compute trace).
"""
from __future__ import annotations

from pkbsim.device import lower_symm
from pkbsim.symm.allocations import state
from pkbsim.symm.api import install_symm_api
from pkbsim.symm.handle import on_pad_host_write
from pkbsim.symm.ops import register_cpu_kernels
from pkbsim.world.comms import storage_key
from pkbsim.world.plugins import Plugin, register
from pkbsim.world.sites import user_site


class HostAccesses:
    """The plug-in's `OpsWatch`: free for a rank's ops until its world has a symmetric allocation."""

    def before(self, ctx, reads: list, writes: list, what: str) -> None:
        if (reads or writes) and state(ctx.world).by_storage:
            # checked before the op touches memory: a peer's concurrent read must not see the new data
            # before the write is on record, or the peer fails on wrong data instead of the race
            lower_symm.on_host_access(ctx, reads, writes, what, user_site)

    def after(self, ctx, writes: list) -> None:
        by_pad = state(ctx.world).by_pad
        if not by_pad:
            return
        for t in writes:
            alloc = by_pad.get(storage_key(t))
            if alloc is not None:
                start = t.storage_offset() * t.element_size() // 4
                stop = start + max(1, t.numel() * t.element_size() // 4)
                with ctx.world.lock:
                    on_pad_host_write(ctx.world, alloc, range(start, stop), ctx.rank, user_site())

    def peer_bytes(self, ctx, tensors: list) -> dict[int, int]:
        by_storage = state(ctx.world).by_storage
        out: dict[int, int] = {}
        if by_storage:
            for t in tensors:
                alloc = by_storage.get(storage_key(t))
                if alloc is not None and alloc.rank != ctx.rank:
                    out[alloc.rank] = out.get(alloc.rank, 0) + t.numel() * t.element_size()
        return out


def install(patches) -> None:
    register_cpu_kernels()  # once per process: torch.library registrations outlive a run
    install_symm_api(patches)


PLUGIN = register(Plugin("symm", install, ops=HostAccesses()))
