"""All-reduce + residual + RMSNorm with the normalisation in PyTorch's fused rms_norm kernel.

The reference spends four elementwise/reduction passes over the fp32 sum (square, mean, rsqrt, scale);
F.rms_norm does the statistics and the scaling in one kernel, so the epilogue reads the fp32 tensor
once instead of several times: on one GPU, where the all-reduce is the identity, that is the whole
difference.
"""
import torch.distributed as dist
import torch.nn.functional as F


def solution(partial, residual, gamma, eps):
    s = partial.clone()
    if dist.get_world_size() > 1:
        dist.all_reduce(s)
    r = s.float() + residual.float()
    y = F.rms_norm(r, (r.shape[-1],), eps=eps)
    return y.to(partial.dtype) * gamma, r.to(partial.dtype)
