"""Causal zigzag ring attention with every K/V block pushed to its consumers by the copy engines,
fully overlapped with the attention compute.

Instead of passing blocks around the ring one step at a time (NCCL send/recv kernels on the SMs and
a wait at the end of every step), each rank's side stream writes its own K/V block straight into
slot `rank` of every peer's cached symmetric inbox, nearest consumer first (rank r+1 needs it at step
1, r+2 at step 2, ...), and signals each peer as its copy lands. The compute stream waits only for the
signal of the block it needs next, so after the first block every transfer is hidden behind
attention. One barrier at the start keeps a rank from overwriting a slot that a peer is still reading
from the previous call. The attention and the log-sum-exp merges are the task's own (same order,
same arithmetic); the second-chunk merges are written in place instead of re-concatenating out and
lse at every step.
Bytes over the links per rank: (ws-1) blocks out and in, as in the ring (NVSwitch makes direct
writes as cheap as neighbour writes). Full size (16384 tokens, 16 heads of 128, fp32, 8 ranks): ~150
GFLOP of fp32 matmuls and ~3 GB of softmax passes per rank (~6 ms), against 7 blocks of 32 MiB
(~0.1 ms each) that the reference already overlaps; the gain is the SMs NCCL's kernels no longer
occupy, the per-step synchronisation and the concatenations: expect ~1.05-1.1x.
"""
import torch
import torch.distributed as dist

from tasks.parallelism._ring import attn, merge
from tasks.solutions._symm import peer_view, symmetric_buffer

ARRIVED = 1  # signal channel: "my block is in your inbox" (channel 0 is the barrier's)


def solution(q, k, v):
    rank, ws = dist.get_rank(), dist.get_world_size()
    c = q.shape[1] // 2
    inbox, hdl = symmetric_buffer((ws, 2, *k.shape), k.dtype, k.device, tag="ring_attention_causal")
    slot_numel = inbox[0].numel()

    hdl.barrier(channel=0)
    compute, copies = torch.cuda.current_stream(), torch.cuda.Stream(device=q.device)
    copies.wait_stream(compute)
    with torch.cuda.stream(copies):
        for step in range(1, ws):
            peer = (rank + step) % ws
            slot = peer_view(hdl, peer, inbox[0], offset=rank * slot_numel)
            slot[0].copy_(k)
            slot[1].copy_(v)
            hdl.put_signal(peer, channel=ARRIVED)

    qt = q.transpose(1, 2)  # (B, H, 2c, Dh)
    out, lse = attn(qt, k.transpose(1, 2), v.transpose(1, 2), causal=True)
    for step in range(1, ws):
        src = (rank - step) % ws
        hdl.wait_signal(src, channel=ARRIVED)
        kt, vt = inbox[src, 0].transpose(1, 2), inbox[src, 1].transpose(1, 2)
        if step <= rank:  # from a lower rank: its first chunk only
            out, lse = merge(out, lse, *attn(qt, kt[:, :, :c], vt[:, :, :c], causal=False))
        else:  # from a higher rank: the second local chunk only
            o2, l2 = merge(out[:, :, c:], lse[:, :, c:], *attn(qt[:, :, c:], kt, vt, causal=False))
            out[:, :, c:], lse[:, :, c:] = o2, l2
    compute.wait_stream(copies)
    return out.transpose(1, 2).contiguous(), lse
