"""All-gather into a stacked tensor over symmetric memory: one kernel pulls every peer's shard.

Each rank copies its shard into a cached symmetric buffer; after a barrier, one `torch.stack` over
views of all peers' buffers fills the output, so the SMs read the ws-1 remote shards concurrently
over NVLink instead of NCCL's ws-1 ring steps.
Bytes over the links per rank: (ws-1) shards in, the same as NCCL. At the full size (32 MiB shards,
224 MiB received per rank at 8 ranks) NCCL's ring reaches ~360 GB/s bus bandwidth (~0.65 ms);
direct reads reach ~380-420 GB/s and skip the ring's per-step synchronisation, less the 32 MiB
copy-in (~15 us): expect ~1.05-1.15x. For small shards the gain is latency: two barriers (~3 us
each) against NCCL's ~15 us launch-to-completion, ~2x.
"""
from tasks.solutions._direct import pull_all_gather
from tasks.solutions._symm import symmetric_buffer


def solution(x):
    buf, hdl = symmetric_buffer(x.shape, x.dtype, x.device, tag="all_gather")
    buf.copy_(x)
    return pull_all_gather(buf, hdl, x)
