"""Honest on one GPU: the sum over a single rank is the input itself; skips a redundant all_reduce."""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    if dist.get_world_size() > 1:
        dist.all_reduce(out)
    return out
