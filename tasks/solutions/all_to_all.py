"""All-to-all with equal chunks over symmetric memory: every chunk is written straight into its
destination's buffer.

Rank r copies chunk j of its input into slot r of rank j's cached symmetric buffer (peers in a
rotated order so that all links carry traffic at once), a barrier publishes the writes, and the
output is one local copy of the rank's own buffer. A leading barrier keeps a rank from overwriting a
slot its owner is still copying out from the previous call.
Bytes over the links per rank: (ws-1) chunks out and in, as in NCCL. At the full size (16 MiB chunks,
8 ranks) that is 7 x 16.8 MB = 117 MB each way. NCCL moves it through all peers at once at about the
NVLink rate SM-driven traffic reaches on H100 (~350-370 GB/s of the 450 GB/s per direction: nccl-tests
#212, nccl#1455): ~0.33 ms. Here the same 117 MB leaves one peer at a time from one stream, each
contiguous copy_ a copy-engine copy of at most ~380 GB/s one way (nccl#1264): >= 0.31 ms, a tie at best.
Then the copy-out reads and writes 128 MiB (268 MB of HBM traffic: 80 us at the H100's 3.35 TB/s peak,
~100 us at a copy's ~80%), which NCCL does not do (it receives into the output), plus two barriers:
~0.42-0.45 ms, so expect ~0.75-0.8x at the full size. The gain is for small chunks, where NCCL's per-peer
latency dominates (~2x). (pkb's prediction and the earlier estimate: docs/timing_model_log.md#from-the-docstrings.)
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
