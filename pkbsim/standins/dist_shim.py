"""torch.distributed entry points that must behave differently in the simulated world.

- init_process_group: whatever backend, init_method or store the script asks for, the rank joins the
  simulated world through the "sim" backend and the world's shared store.
- new_group: NCCL requires every rank of the parent to call it, in the same order, with the same ranks;
  each call is therefore matched like a collective on WORLD before torch creates the group.
- batch_isend_irecv: its operations form one NCCL group: they start together and complete together.
"""
from __future__ import annotations

import torch.distributed as dist
import torch.distributed.device_mesh as device_mesh
import torch.distributed.distributed_c10d as c10d

from pkbsim.world.comms import Batch
from pkbsim.world.context import current
from pkbsim.world.patching import Patches
from pkbsim.world.process_group import BACKEND_NAME
from pkbsim.world.sites import user_site


def install_dist(patches: Patches) -> None:
    orig_init, orig_new_group, orig_batch = c10d.init_process_group, c10d.new_group, c10d.batch_isend_irecv

    def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                           group_name="", pg_options=None, device_id=None, **kwargs):
        ctx = current()
        if ctx is None:
            return orig_init(backend, init_method, timeout, world_size, rank, store, group_name, pg_options,
                             device_id, **kwargs)
        if world_size not in (-1, None, ctx.world.size) or rank not in (-1, None, ctx.rank):
            raise ValueError(f"init_process_group(world_size={world_size}, rank={rank}) disagrees with the "
                             f"simulated launch (rank {ctx.rank} of {ctx.world.size}); read RANK/WORLD_SIZE")
        if device_id is not None:
            from pkbsim.standins.cuda_shim import set_device
            set_device(device_id)
        ctx.trace.record("host", "init_process_group", user_site(), backend=str(backend))
        ctx.nccl = "nccl" in str(backend).lower()  # device rules only bind NCCL programs
        return orig_init(BACKEND_NAME, world_size=ctx.world.size, rank=ctx.rank, store=ctx.world.store)

    def new_group(ranks=None, *args, **kwargs):
        ctx = current()
        if ctx is not None and ctx.world_comm is not None:
            world_comm = ctx.world_comm
            site = user_site()
            key = tuple(sorted(ranks)) if ranks is not None else None
            shown = list(key) if key is not None else "all"
            op = ctx.engine.post_collective(world_comm, ctx.rank, "new_group", (key,), None, lambda a: None,
                                            f"new_group(ranks={shown})", site)
            ctx.engine.wait(ctx.rank, [op])
        return orig_new_group(ranks, *args, **kwargs)

    def batch_isend_irecv(p2p_op_list):
        ctx = current()
        if ctx is None:
            return orig_batch(p2p_op_list)
        ctx.batch = Batch()
        try:
            return orig_batch(p2p_op_list)
        finally:
            ctx.batch = None

    # device_mesh imports init_process_group and new_group by name: a mesh-only world must join the simulation
    for mod in (dist, c10d, device_mesh):
        for name, fn in (("init_process_group", init_process_group), ("new_group", new_group),
                         ("batch_isend_irecv", batch_isend_irecv)):
            if hasattr(mod, name):
                patches.set(mod, name, fn)
    patches.set(dist, "is_nccl_available", lambda: True)
