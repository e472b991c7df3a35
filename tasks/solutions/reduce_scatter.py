"""Reduce-scatter (sum) over symmetric memory with direct peer writes and a local reduction.

Rank r writes block j of its input straight into slot r of rank j's cached symmetric staging
buffer (ws-1 remote copies, peers in a rotated order so that no link is hot), then after a barrier
sums the ws slots of its own buffer locally. The input is never copied into symmetric memory first,
and the reduction reads local HBM (4.8 TB/s) rather than the links.
Bytes over the links per rank: (ws-1) blocks out, as in NCCL's ring. At the full size (32 MiB
blocks, 256 MiB input at 8 ranks) that is 7 x 33.6 MB = 235 MB; NCCL's ring needs ~0.65 ms at ~360 GB/s
bus bandwidth (nccl#1281), its reduction hidden inside the pipeline. Here the pushes go one peer at a
time from one stream, each a copy-engine copy of at most ~380 GB/s one way (nccl#1264): >= 0.62 ms, a
tie at best; then, after the barrier, the local sum reads 256 MiB and writes 32 MiB (302 MB: 90 us at
the H100's 3.35 TB/s peak, ~110 us at ~80%), plus the own block's local copy (~25 us): ~0.75-0.8 ms,
so expect ~0.8-0.9x at the full size. Small blocks gain ~2x from replacing NCCL's launch and ring
latency by two barriers. (pkb's prediction and the earlier estimate: docs/timing_model_log.md#from-the-docstrings.)
"""
import torch.distributed as dist

from tasks.solutions._direct import push_reduce_scatter
from tasks.solutions._symm import symmetric_buffer


def solution(x):
    ws = dist.get_world_size()
    blocks = x.view(ws, x.shape[0] // ws, *x.shape[1:])
    staging, hdl = symmetric_buffer(blocks.shape, x.dtype, x.device, tag="reduce_scatter")
    return push_reduce_scatter(blocks, staging, hdl)
