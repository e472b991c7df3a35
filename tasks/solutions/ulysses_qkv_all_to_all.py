"""QKV projection + Ulysses all-to-all, with the all-to-all overlapped with the GEMM by token chunks
and written straight into the destinations' buffers.

The GEMM runs in CHUNKS slices of the rank's tokens on the compute stream; as each slice finishes, a side
stream copies its heads for rank j directly into rank j's cached symmetric inbox, at this rank's rows, while
the next slice is being multiplied. The reference's permute-and-copy pass and NCCL's staging both disappear,
and only the last slice's copies are exposed. One barrier before the writes (every rank has copied out the
previous call's inbox) and one after (all writes landed). Full size (65536 tokens, hidden 4096, 32 heads of
128, 8 ranks): the GEMM is 2*8192*4096*12288 = 824 GFLOP per rank (~1.1 ms at ~750 TFLOP/s bf16), the
all-to-all moves 7/8 * 192 MiB per rank (~0.5 ms through NCCL) and the permute copies 192 MiB (~0.1 ms).
Serial that is ~1.7 ms; overlapped, about the GEMM plus one chunk's copies plus the 192 MiB copy-out. The
chunking and the side-stream copies make the local work about a fifth slower on their own (measured on one H200
without communication: docs/timing_model_log.md#from-the-docstrings), so at 8 ranks expect ~1.0-1.15x: hiding
the all-to-all only just pays for them.
"""
import torch
import torch.distributed as dist

from tasks.solutions._symm import peer_view, symmetric_buffer

CHUNKS = 4


def solution(x, w_qkv, heads):
    rank, ws = dist.get_rank(), dist.get_world_size()
    n = x.shape[0]
    d = w_qkv.shape[0] // (3 * heads)
    slot_shape = (n, 3, heads // ws, d)
    inbox, hdl = symmetric_buffer((ws, *slot_shape), x.dtype, x.device, tag="ulysses_qkv_all_to_all")
    slot_numel = inbox[0].numel()
    destinations = [peer_view(hdl, p, inbox[0], offset=rank * slot_numel) for p in range(ws)]

    hdl.barrier(channel=0)
    compute, copies = torch.cuda.current_stream(), torch.cuda.Stream(device=x.device)
    slices = []  # kept alive until the copy stream has been waited for
    step = -(-n // CHUNKS)
    for start in range(0, n, step):
        rows = slice(start, min(start + step, n))
        qkv = (x[rows] @ w_qkv.t()).view(-1, 3, ws, heads // ws, d)
        slices.append(qkv)
        copies.wait_stream(compute)
        with torch.cuda.stream(copies):
            for i in range(ws):
                peer = (rank + i) % ws
                destinations[peer][rows].copy_(qkv[:, :, peer])
    compute.wait_stream(copies)
    hdl.barrier(channel=0)
    return inbox.reshape(ws * n, *slot_shape[1:]).clone()
