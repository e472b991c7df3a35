"""The Python side of pkb's TKParallelTensor (runtime/thunderkittens/parallel_tensor.cuh): ThunderKittens'
multi-GPU tensors on the simulated symmetric memory.

ThunderKittens allocates each rank's part with the driver's VMM calls, swaps handles between the
processes through its KittensBroker and binds them to a multicast object. Here every rank's part is a
symmetric-memory allocation and the rendezvous is the collective all ranks join at the same point (as the
broker's exchange is): it gives the peers' addresses and the multicast range that device code follows.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from pkbsim.world.comms import behind_the_program
from pkbsim.world.context import require


def _check(rank: int, world: int) -> None:
    ctx = require()
    if world != ctx.world.size:
        raise RuntimeError(f"TKParallelTensor: local_world_size {world} but the world has {ctx.world.size} ranks")
    if rank != ctx.rank:
        raise RuntimeError(f"TKParallelTensor: local_rank {rank} on rank {ctx.rank} (each rank passes its own)")


def allocate(shape, dtype: torch.dtype, rank: int, world: int, multicast: bool):
    """(this rank's tensor, every rank's address, the multicast address or 0, bytes): a collective."""
    import torch.distributed._symmetric_memory as symm_mem
    _check(rank, world)
    t = symm_mem.empty(tuple(int(s) for s in shape), dtype=dtype, device=torch.device("cuda", rank))
    # fresh physical memory from cuMemCreate reads as zeros on a GPU (the driver clears pages it hands a
    # process), and programs rely on it: PKB's barrier tensor is never cleared before ThunderKittens'
    # barrier counts arrivals in it. A CPU allocation holds whatever was there before.
    with behind_the_program():
        t.zero_()
    handle = symm_mem.rendezvous(t, dist.group.WORLD)
    ptrs = [int(p) for p in handle.buffer_ptrs]
    return t, ptrs, int(handle.multicast_ptr) if multicast else 0, t.untyped_storage().nbytes()


def share(tensor: torch.Tensor, rank: int, world: int):
    """A tensor the program allocated, shared with its peers (ThunderKittens' legacy IPC path): every
    rank's address, exchanged as the broker does; no multicast."""
    _check(rank, world)
    ptrs: list = [None] * world
    dist.all_gather_object(ptrs, int(tensor.data_ptr()))
    return tensor, [int(p) for p in ptrs], 0, tensor.untyped_storage().nbytes()


def device_index(tensor: torch.Tensor) -> int:
    """The GPU a tensor is on as the program sees it (`x.device().index()` in ThunderKittens' host checks):
    CPU tensors stand for the rank's GPU memory."""
    from pkbsim.standins.device_identity import seen_device
    ctx = require()
    dev = seen_device(tensor, tensor.device, ctx)
    return -1 if dev.type == "cpu" else int(dev.index if dev.index is not None else ctx.rank)
