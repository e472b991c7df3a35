"""expect: cost slower - an all-reduce built from an all-gather and a local sum: correct, but every rank
receives (N-1) full copies instead of 2(N-1)/N of one, about N/2 times the bytes of NCCL's ring."""
import torch
import torch.distributed as dist


def solution(x):
    parts = torch.empty((dist.get_world_size(), *x.shape), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(parts, x.contiguous())
    return parts.sum(0)
