"""The honest twin of every attack here: an out-of-place all_reduce."""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
