"""The honest twin of all_reduce__data_ptr_cache.py: the same work (the reference's plus one copy) on every
call, no cache."""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out.clone()
