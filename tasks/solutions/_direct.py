"""Reduce-scatter by direct peer writes and all-gather by direct peer reads, on cached symmetric buffers.

Both move exactly the bytes NCCL's ring moves, but straight between the ranks' buffers over NVSwitch
(copy engines for the writes, one SM kernel reading every peer for the gather), with no ring steps
and no staging through FIFOs. Shared by the collective solutions and the all-reduce built from them.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from tasks.solutions._symm import peer_view


def push_reduce_scatter(blocks: torch.Tensor, staging: torch.Tensor, hdl, out: torch.Tensor | None = None):
    """Sum over ranks of block `rank` of `blocks` (ws, ...). Block j goes into slot `rank` of rank j's
    `staging` (a symmetric buffer shaped like `blocks`), peers in a rotated order so that every link
    carries traffic at once; the sum then reads local memory only."""
    rank, ws = dist.get_rank(), dist.get_world_size()
    hdl.barrier(channel=0)  # every peer has finished summing the previous call's slots
    for i in range(ws):
        peer = (rank + i) % ws
        peer_view(hdl, peer, blocks[peer], offset=rank * blocks[peer].numel()).copy_(blocks[peer])
    hdl.barrier(channel=0)
    return torch.sum(staging, 0, out=out)


def pull_all_gather(buf: torch.Tensor, hdl, local: torch.Tensor, combine=torch.stack):
    """`combine` (default: stack in rank order) of every rank's `buf`, already filled with this rank's
    `local`; torch.stack and torch.cat read all peers in one kernel. The closing barrier keeps a fast
    rank from overwriting its buffer while a slow one still reads it."""
    rank, ws = dist.get_rank(), dist.get_world_size()
    hdl.barrier(channel=0)
    out = combine([local if p == rank else peer_view(hdl, p, buf) for p in range(ws)])
    hdl.barrier(channel=0)
    return out
