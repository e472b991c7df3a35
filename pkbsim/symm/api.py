"""torch.distributed._symmetric_memory on the simulated world: empty, rendezvous and the module helpers."""
from __future__ import annotations

import torch
import torch.distributed._symmetric_memory as symm_mem

from pkbsim.symm.allocations import RANK_STATE, new_buffer, note_rendezvous, track_handle
from pkbsim.symm.handle import (
    SIGNAL_PAD_BYTES,
    Allocation,
    SimSymmetricMemory,
    state,
    storage_key,
)
from pkbsim.world import host_sync
from pkbsim.world.comms import behind_the_program, is_fake, resolve_comm
from pkbsim.world.context import current, require
from pkbsim.world.findings import Finding
from pkbsim.world.ops_mode import ensure_ops_mode
from pkbsim.world.patching import Patches
from pkbsim.world.sites import user_site
from pkbsim.world.world import SimAbort


def empty(*size, dtype: torch.dtype | None = None, device=None) -> torch.Tensor:
    """torch's signature exactly (2.11 and 2.13): a keyword it lacks, such as `group`, is a TypeError there."""
    ctx = require()
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    site = user_site()
    dtype = dtype or torch.get_default_dtype()
    probe = torch.empty(1, dtype=dtype, device="cpu")  # fake in a shape run; NaN under the screen's poison
    t = torch.empty(size, dtype=dtype, device="cpu") if is_fake(probe) else None
    st = state(ctx.world)
    with behind_the_program():  # real also in a shape run: the simulator polls it (put/wait_signal, barrier)
        pad = torch.zeros(SIGNAL_PAD_BYTES // 4, dtype=torch.int32)
        if t is None:  # the bytes are pkb's, so that their release is seen (pkbsim/symm/allocations.py)
            t, alloc = new_buffer(ctx.rank, tuple(size), probe, pad, st, site)
        else:
            alloc = Allocation(ctx.rank, t, pad, site=site)
    with ctx.world.lock:
        ctx.world.track_clocks = True
        st.add(alloc, storage_key(t), storage_key(pad))
    ctx.trace.record("symm", "empty", site, shapes=[list(t.shape)], dtypes=[str(t.dtype)[6:]],
                     bytes=t.numel() * t.element_size())
    ensure_ops_mode(ctx)
    return t


def allocation_of(ctx, t: torch.Tensor) -> Allocation | None:
    st = state(ctx.world)
    st.reap()
    return st.by_storage.get(storage_key(t))


def rendezvous(tensor: torch.Tensor, group) -> SimSymmetricMemory:
    """As torch's (2.11 and 2.13 alike): the group is required; a call without one is a TypeError, as on a GPU."""
    ctx = require()
    site = user_site()
    alloc = allocation_of(ctx, tensor)
    if alloc is None:
        msg = f"rendezvous on a tensor that symm_mem.empty did not allocate (at {site}); allocate it with symm_mem.empty"
        ctx.world.fail(Finding("protocol", msg, [ctx.rank], [site]))
        raise SimAbort(msg)
    comm = resolve_comm(ctx, group)
    st = state(ctx.world)
    cached = st.handles.get((storage_key(tensor), comm.name))
    if cached is not None:
        return cached
    offset = tensor.storage_offset() * tensor.element_size()

    def exchange(allocs):
        note_rendezvous(list(allocs), st)
        return {gr: SimSymmetricMemory(list(allocs), grank, comm, offset) for grank, gr in enumerate(comm.ranks)}

    nbytes = tensor.untyped_storage().nbytes()
    op = ctx.engine.post_collective(comm, ctx.rank, "symm_mem.rendezvous", (nbytes,), alloc, exchange,
                                    f"symm_mem.rendezvous({nbytes} bytes)", site)
    ctx.engine.wait(ctx.rank, [op])
    # a host-side exchange in torch, which it may follow with a barrier: taken as ordering everything the
    # members did before it (never a race invented across it; one hidden at worst)
    host_sync.wait_streams(ctx, [ctx.stream_id])
    hdl = op.slot.result.pop(ctx.rank)   # the engine keeps no handle: the program's references decide
    track_handle(hdl, alloc, st)
    with ctx.world.lock:
        # torch caches the handle in the allocation: it lives while the tensor does (dropped by reap)
        st.handles[(storage_key(tensor), comm.name)] = hdl
    return hdl


def handle_for(ctx, t: torch.Tensor, group_name: str) -> SimSymmetricMemory | None:
    st = state(ctx.world)
    st.reap()
    return st.handles.get((storage_key(t), group_name))


def is_symm_mem_tensor(t: torch.Tensor) -> bool:
    ctx = current()
    return ctx is not None and allocation_of(ctx, t) is not None


def get_symm_mem_workspace(group_name: str, min_size: int) -> SimSymmetricMemory:
    ctx = require()
    workspaces = RANK_STATE.of(ctx).workspaces
    buf = workspaces.get(group_name)
    if buf is None or buf.numel() < min_size:
        buf = workspaces[group_name] = empty(min_size, dtype=torch.uint8)
    return rendezvous(buf, group_name)


def install_symm_api(patches: Patches) -> None:
    table = {
        "empty": empty, "rendezvous": rendezvous, "is_symm_mem_tensor": is_symm_mem_tensor,
        "get_symm_mem_workspace": get_symm_mem_workspace,
        "enable_symm_mem_for_group": lambda *a, **k: None, "is_symm_mem_enabled_for_group": lambda *a, **k: True,
        "set_backend": lambda *a, **k: None, "get_backend": lambda *a, **k: "CUDA",
        "is_nvshmem_available": lambda: False,
        "get_signal_pad_size": lambda: SIGNAL_PAD_BYTES,
    }
    for name, fn in table.items():
        patches.set(symm_mem, name, fn)
