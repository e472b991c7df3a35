"""All-to-all with equal chunks over symmetric memory: every chunk is written straight into its
destination's buffer.

Rank r copies chunk j of its input into slot r of rank j's cached symmetric buffer (peers in a
rotated order so that all links carry traffic at once), a barrier publishes the writes, and the
output is one local copy of the rank's own buffer. A leading barrier keeps a rank from overwriting a
slot its owner is still copying out from the previous call.
Bytes over the links per rank: (ws-1) chunks out and in, as in NCCL. NCCL's all-to-all is ws-1
grouped send/recv pairs staged through its FIFO buffers (~0.45 ms at ~300-330 GB/s for the full
size, 16 MiB chunks at 8 ranks); direct writes avoid the staging and the per-peer protocol and run at
~380-420 GB/s, plus a 128 MiB local copy-out (~60 us): expect ~1.05-1.15x, and ~2x for small chunks
where NCCL's per-peer latency dominates.
"""
import torch.distributed as dist

from tasks.solutions._symm import peer_view, symmetric_buffer


def solution(x):
    rank, ws = dist.get_rank(), dist.get_world_size()
    inbox, hdl = symmetric_buffer(x.shape, x.dtype, x.device, tag="all_to_all")
    hdl.barrier(channel=0)  # every peer has copied out the previous call's inbox
    for i in range(ws):
        peer = (rank + i) % ws
        peer_view(hdl, peer, x[peer], offset=rank * x[peer].numel()).copy_(x[peer])
    hdl.barrier(channel=0)
    return inbox.clone()
