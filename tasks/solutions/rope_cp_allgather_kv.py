"""RoPE + K/V all-gather for load-balanced context parallelism, gathered straight into sequence order.

Each rank writes its rotated keys and its values (rounded to bf16 by the write itself) into a cached
symmetric buffer. After a barrier one `torch.cat` per output pulls every peer's two chunks directly to
their global positions (chunk i comes from rank i's first slot when i < ws, else from rank 2ws-1-i's
second slot), so the zigzag reordering costs nothing: the reference's gather-then-cat-and-flip copies
disappear, and the SMs read all peers concurrently over NVLink.
Full size (131072 tokens, 8 KV heads of 128, 8 ranks): K and V are 256 MiB each in sequence order;
both all-gathers move 2 * 7/8 * 256 MiB per rank (~1.3 ms at ~360 GB/s for NCCL's ring), and the
reference then re-copies both 256 MiB tensors to reorder them (~0.25 ms) and materialises the rotated
keys once more. Direct reads at ~380-420 GB/s without the reorder: expect ~1.2-1.3x.
"""
import torch
import torch.distributed as dist

from tasks.solutions._symm import peer_view, symmetric_buffer


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    xf = x.float()
    rot = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return xf * cos[:, None, :] + rot * sin[:, None, :]


def solution(q, k, v, cos, sin):
    rank, ws = dist.get_rank(), dist.get_world_size()
    chunk = k.shape[0] // 2
    kv, hdl = symmetric_buffer((2, *k.shape), k.dtype, k.device, tag="rope_cp_allgather_kv")
    kv[0].copy_(_rope(k, cos, sin))
    kv[1].copy_(v)
    q_rot = _rope(q, cos, sin).to(q.dtype)
    hdl.barrier(channel=0)
    peers = [kv if p == rank else peer_view(hdl, p, kv) for p in range(ws)]
    outs = []
    for t in range(2):  # 0: keys, 1: values
        first = [peers[p][t, :chunk] for p in range(ws)]                  # chunks 0 .. ws-1
        second = [peers[p][t, chunk:] for p in reversed(range(ws))]       # chunks ws .. 2ws-1
        outs.append(torch.cat(first + second))
    hdl.barrier(channel=0)
    return q_rot, outs[0], outs[1]
