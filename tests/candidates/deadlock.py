"""Broken: rank 0 skips the collective, so the other ranks wait forever. Must be "timeout" within the
timeout, naming where each rank was, and leave no process behind."""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    if dist.get_rank() != 0:
        dist.all_reduce(out)
    return out
