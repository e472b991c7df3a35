"""All-gather into a stacked tensor over symmetric memory: one kernel pulls every peer's shard.

Each rank copies its shard into a cached symmetric buffer; after a barrier, one `torch.stack` over views of
all peers' buffers fills the output, so the SMs read the ws-1 remote shards concurrently over NVLink instead
of NCCL's ws-1 ring steps. Bytes over the links per rank: (ws-1) shards in, the same as NCCL. At the full size
(32 MiB shards, 224 MiB = 235 MB received per rank at 8 ranks) NCCL's ring all_gather reaches ~350 GB/s bus
bandwidth (nccl-tests#212, nccl#1281: ~0.67 ms). torch.stack's reads are SM loads: NCCL's symmetric-kernel
model puts what SM-driven NVLink traffic achieves on Hopper at ~360 GB/s (sym_kernels.cc), copy engines ~380
(nccl#1264), so the pull takes ~0.62-0.65 ms, plus the 32 MiB copy-in (67 MB of HBM traffic, ~25 us): expect
~1.0-1.05x. For small shards the gain is latency: two barriers (~3 us each) against NCCL's ~15 us
launch-to-completion, ~2x. (pkb's prediction and the earlier estimate:
docs/timing_model_log.md#from-the-docstrings.)
"""
from tasks.solutions._direct import pull_all_gather
from tasks.solutions._symm import symmetric_buffer


def solution(x):
    buf, hdl = symmetric_buffer(x.shape, x.dtype, x.device, tag="all_gather")
    buf.copy_(x)
    return pull_all_gather(buf, hdl, x)
