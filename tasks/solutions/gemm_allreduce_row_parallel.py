"""GEMM + all-reduce with the GEMM writing straight into symmetric memory.

The partial product (with the bias added on rank 0 inside the GEMM, as vLLM does) is written by
`addmm`/`mm` directly into a cached symmetric buffer, so no copy precedes the reduction, and
PyTorch's two-shot kernel (one-shot for small outputs) reduces it in place over NVLink.
Full size (4096 tokens, 28672 -> 8192, 8 ranks): the GEMM is 2*4096*3584*8192 = 240 GFLOP per rank
(~0.33 ms) and the all-reduce moves 2*7/8 * 64 MiB per rank (~0.33 ms at ~360 GB/s bus bandwidth),
the same volume as NCCL's ring. The copy-out of the 64 MiB result costs ~30 us; the two-shot kernel's
single launch and direct reads save NCCL's per-step ring synchronisation: expect ~1.0-1.1x. For
decode-sized batches (a few tokens, < 512 KiB of output) the one-shot path is ~2x faster than NCCL.
"""
import torch
import torch.distributed as dist

from tasks.solutions._symm import all_reduce_symmetric, symmetric_buffer


def solution(x, w, b):
    buf, _ = symmetric_buffer((x.shape[0], w.shape[0]), x.dtype, x.device, tag="gemm_allreduce_row_parallel")
    if dist.get_rank() == 0:
        torch.addmm(b, x, w.t(), out=buf)
    else:
        torch.mm(x, w.t(), out=buf)
    total = all_reduce_symmetric(buf)
    return total.clone() if total.data_ptr() == buf.data_ptr() else total
