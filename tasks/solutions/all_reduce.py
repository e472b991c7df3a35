"""All-reduce (sum), out of place, over symmetric memory: one-shot for small tensors, direct
reduce-scatter + all-gather for large ones, two-shot for large ones that do not split evenly.

- <= 512 KiB: the input is copied into a cached symmetric buffer and PyTorch's one-shot kernel reads
  all ws-1 peer buffers and sums, one barrier round, one kernel: ~6-8 us on 8 H100/H200s against
  NCCL's ~15-25 us (ring/tree with the LL protocol), so small all-reduces run ~2-3x faster.
- larger, numel divisible by ws: rank r writes block j of its input straight into rank j's staging
  buffer (copy engines), sums the ws slots of its own block locally into a second symmetric buffer,
  and one kernel then pulls every rank's summed block into the output. That is 2(ws-1)/ws of the
  bytes per rank over the links, NCCL's ring volume, without its 2(ws-1) synchronised steps, and
  with no copy into or out of symmetric memory. At the full size (256 MiB fp32, 8 ranks) that is
  2 x 7/8 x 268 MB = 470 MB per rank: >= 1.24 ms at the ~380 GB/s a copy-engine copy reaches one way
  (nccl#1264; the gather is an SM kernel, ~360 GB/s), plus the local sum (reads 256 MiB, writes 32 MiB:
  302 MB, 90-110 us at 80-100% of the H100's 3.35 TB/s) and the own block's copy: ~1.4-1.5 ms.
  NCCL picks NVLS on 8 H100s at this size: the switch reduces and multicasts, S(n+1)/n = 1.125 S per
  direction instead of 1.75 S, ~480 GB/s bus bandwidth (nccl-tests#212): ~1.0 ms, plus the
  reference's input clone (536 MB of HBM traffic, ~0.2 ms). Expect ~0.8-0.9x; with NVLS off (ring at
  ~365 GB/s, nccl#1455: ~1.3 ms, ~1.5 ms with the clone) it would be ~1.0x.
- otherwise PyTorch's two-shot kernel (reduce-scatter + all-gather in one launch), after a copy in and before
  a copy out. Its launch is capped to a few dozen blocks, far from HBM's bandwidth, so at 256 MiB it is not
  expected to beat NCCL. (pkb's prediction, the earlier estimate and the two-shot kernel's measured rate:
  docs/timing_model_log.md#from-the-docstrings.)
"""
import torch.distributed as dist

from tasks.solutions._direct import pull_all_gather, push_reduce_scatter
from tasks.solutions._symm import (
    ONE_SHOT_MAX_BYTES,
    all_reduce_symmetric,
    symmetric_buffer,
)


def solution(x):
    ws = dist.get_world_size()
    if x.numel() * x.element_size() > ONE_SHOT_MAX_BYTES and x.numel() % ws == 0:
        blocks = x.reshape(ws, x.numel() // ws)
        staging, rs_hdl = symmetric_buffer(blocks.shape, x.dtype, x.device, tag="all_reduce.staging")
        mine, ag_hdl = symmetric_buffer(blocks.shape[1:], x.dtype, x.device, tag="all_reduce.block")
        push_reduce_scatter(blocks, staging, rs_hdl, out=mine)
        return pull_all_gather(mine, ag_hdl, mine).view(x.shape)
    buf, _ = symmetric_buffer(x.shape, x.dtype, x.device, tag="all_reduce")
    buf.copy_(x)
    total = all_reduce_symmetric(buf)
    return total.clone() if total.data_ptr() == buf.data_ptr() else total
