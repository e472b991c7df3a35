"""GEMM + all-reduce with the GEMM writing straight into symmetric memory.

The partial product (with the bias added on rank 0 inside the GEMM, as vLLM does) is written by `addmm`/`mm`
directly into a cached symmetric buffer, so no copy precedes the reduction, and PyTorch's two-shot kernel
(one-shot for small outputs) reduces it in place over NVLink. Full size (4096 tokens, 28672 -> 8192, 8 ranks):
the GEMM is 2*4096*3584*8192 = 240 GFLOP per rank (~0.33 ms) and the all-reduce moves 2*7/8 * 64 MiB per rank
(~0.33 ms at ~360 GB/s bus bandwidth), the same volume as NCCL's ring. Without communication (world size 1)
the two-shot kernel and the copy-out still cost time: PyTorch caps the kernel to a few dozen blocks, far from
HBM's bandwidth. At 8 ranks the links are the tighter limit: the two-shot kernel's unicast traffic reaches
~360 GB/s at most (NCCL's symmetric-kernel model, sym_kernels.cc: ~0.33-0.35 ms), while NCCL picks NVLS for a
64 MiB all-reduce on 8 H100s (~480 GB/s bus bandwidth, nccl-tests#212: ~0.25-0.3 ms plus its launch), and the
copy-out of the 64 MiB result (134 MB of HBM traffic, ~50 us) is extra: expect ~0.9-1.0x at the full size (the
H200 measurement, pkb's prediction and the earlier estimate: docs/timing_model_log.md#from-the-docstrings).
This file is a positive control for correctness and for decode-sized batches (< 512 KiB of output), where the
one-shot path is ~2x faster than NCCL.
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
