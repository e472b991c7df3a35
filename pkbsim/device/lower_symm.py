"""Lowering of symmetric-memory host code into the protocol IR.

Called from pkbsim.symm (put_signal, wait_signal, barrier, torch.ops.symm_mem) and from the rank's ops
mode (host tensor ops that read or write a symmetric buffer, e.g. through `get_buffer` views). The
handle itself moves the clocks of put/wait; these hooks record the events and check host accesses.
"""
from __future__ import annotations

import numpy as np
import torch

from pkbsim.device.accesses import byte_runs
from pkbsim.device.ir import Event
from pkbsim.device.protocol import device_state, emit
from pkbsim.symm.allocations import state as symm_state
from pkbsim.symm.allocations import storage_key
from pkbsim.world.comms import is_fake


def on_put_signal(ctx, dst: int, slot: int, site: str) -> None:
    """Under the world lock, right after put_signal published its clock: later accesses are newer."""
    ctx.world.clocks.tick(ctx.rank)
    device_state(ctx.world).log.append(Event("signal", ctx.rank, site, "put_signal", dst, slot, slot + 1, True,
                                             "set", 1, "release"))


def on_wait_signal(ctx, slot: int, site: str) -> None:
    device_state(ctx.world).log.append(Event("wait", ctx.rank, site, "wait_signal", ctx.rank, slot, slot + 1, True,
                                             "==", 1, "acquire"))


def on_barrier(ctx, channel: int, site: str) -> None:
    device_state(ctx.world).log.append(Event("barrier", ctx.rank, site, "barrier", value=channel))


def on_symm_op(ctx, name: str, site: str) -> None:
    """A torch.ops.symm_mem op: a kernel that starts and ends with a barrier over its group."""
    device_state(ctx.world).log.append(Event("kernel", ctx.rank, site, f"symm_mem.{name}"))


def on_host_access(ctx, reads: list[torch.Tensor], writes: list[torch.Tensor], what: str, site_fn) -> None:
    """Host tensor ops on symmetric buffers become get/put events (and are checked for races)."""
    if any(map(is_fake, reads)) or any(map(is_fake, writes)):
        return  # a shape run: no data and no addresses, so nothing to order (the screen-size run checked it)
    by_storage = symm_state(ctx.world).by_storage
    hits = [(t, False) for t in reads if storage_key(t) in by_storage]
    hits += [(t, True) for t in writes if storage_key(t) in by_storage]
    if not hits:
        return
    memory = device_state(ctx.world).memory
    site = site_fn()
    for t, write in hits:
        lo = t.storage_offset() * t.element_size()
        extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
        hi = lo + extent * t.element_size() if t.numel() else lo
        base = t.untyped_storage().data_ptr()
        region = memory.find(base + lo, base + max(hi, lo + 1))
        if region is None or region.on_pad or hi <= lo:
            continue
        for a, b in _view_runs(t, lo, hi):
            emit(ctx.world, Event("put" if write else "get", ctx.rank, site, what, region.owner, a, b, call=ctx.call),
                 region)


def _view_runs(t: torch.Tensor, lo: int, hi: int, limit: int = 1 << 16) -> list[tuple[int, int]]:
    """The contiguous byte ranges of a view of a symmetric buffer (one per row of a column slice): ranks
    that each write their own columns of a peer's buffer write disjoint bytes. Views with more than
    `limit` pieces keep their whole extent [lo, hi)."""
    dims = [(n, s) for n, s in zip(t.shape, t.stride()) if n != 1]
    inner = 1  # elements of the innermost contiguous block
    while dims and dims[-1][1] == inner:
        inner *= dims.pop()[0]
    if not dims or t.numel() // inner > limit:
        return [(lo, hi)]
    starts = np.zeros(1, dtype=np.int64)
    for n, s in dims:
        starts = (starts[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
    return byte_runs(lo + starts * t.element_size(), inner * t.element_size())
