"""All-reduce + residual add + RMSNorm: a symmetric-memory all-reduce feeding a fused RMSNorm epilogue.

The partial sums go into a cached symmetric buffer and are reduced by PyTorch's one-shot (small) or
two-shot (large) kernel; the epilogue adds the residual in place into a single fp32 tensor and
normalises it with `F.rms_norm` (statistics and scaling in one kernel) instead of the reference's
square / mean / rsqrt / multiply passes.
At the full size (8192 x 8192 bf16, 128 MiB) the all-reduce moves the same 2(ws-1)/ws bytes as NCCL's
ring (~0.6 ms either way), while the epilogue drops from ~9 full passes over the fp32 tensor (~2.3 GB
of HBM traffic, ~0.55 ms) to ~5 (~1.3 GB, ~0.3 ms): expect ~1.2x. At decode sizes (a few tokens) the
one-shot kernel's ~6-8 us against NCCL's ~20 us makes it ~2x.
"""
import torch.nn.functional as F

from tasks.solutions._symm import all_reduce_symmetric, symmetric_buffer


def solution(partial, residual, gamma, eps):
    buf, _ = symmetric_buffer(partial.shape, partial.dtype, partial.device, tag="allreduce_residual_rmsnorm")
    buf.copy_(partial)
    r = all_reduce_symmetric(buf).float().add_(residual)
    y = F.rms_norm(r, (r.shape[-1],), eps=eps)
    return y.to(partial.dtype).mul_(gamma), r.to(partial.dtype)
