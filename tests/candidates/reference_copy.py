"""Honest: the reference itself. Must be correct, speed-up near 1, status "slower"."""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
