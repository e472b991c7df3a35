"""Symmetric-memory plumbing shared by the solutions: cached buffers, group names, the all-reduce pick.

A symmetric buffer costs an allocation and a rendezvous (a collective that exchanges memory handles),
far more than the operations that use it, so each buffer is made once per process group, shape, dtype
and purpose, and reused by every later call. The cache hangs off the group through a weak reference:
groups of a finished run (the simulated world starts a fresh world per run) take their buffers with
them. Every solution works on the world group. Callers own the protocol: a buffer is rewritten only
after the peers that read it have passed a barrier.
"""
from __future__ import annotations

import weakref

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

# One-shot all-reduce reads every peer's whole buffer (ws-1 copies over NVLink) but needs a single
# barrier round; above this size the two-shot variant (reduce-scatter + all-gather, 2(ws-1)/ws of the
# bytes) wins on 8 H100/H200s.
ONE_SHOT_MAX_BYTES = 512 * 1024

_BUFFERS: weakref.WeakKeyDictionary[object, dict] = weakref.WeakKeyDictionary()


def group_name() -> str:
    return dist.group.WORLD.group_name


def symmetric_buffer(shape, dtype: torch.dtype, device, *, tag: str = ""):
    """(tensor, handle): this rank's symmetric buffer of `shape`/`dtype`, rendezvoused on the world
    group; `tag` keeps buffers of different purposes apart."""
    group = dist.group.WORLD
    per_group = _BUFFERS.setdefault(group, {})
    key = (tag, tuple(shape), dtype, str(device))
    entry = per_group.get(key)
    if entry is None:
        buf = symm_mem.empty(*shape, dtype=dtype, device=device)
        entry = per_group[key] = (buf, symm_mem.rendezvous(buf, group.group_name))
    return entry


def peer_view(handle, peer: int, like: torch.Tensor, *, offset: int = 0) -> torch.Tensor:
    """A view of `peer`'s copy of a symmetric buffer shaped like `like`, starting `offset` elements in."""
    return handle.get_buffer(peer, list(like.shape), like.dtype, offset)


def all_reduce_symmetric(buf: torch.Tensor) -> torch.Tensor:
    """The sum over ranks of a symmetric buffer; the result may alias `buf`, so use it before the next
    call writes the buffer again."""
    name = group_name()
    if buf.numel() * buf.element_size() <= ONE_SHOT_MAX_BYTES:
        return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", name)
    return torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", name)
