"""expect: functional deadlock - rank 0 thinks its input is already reduced and skips the collective."""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    if dist.get_rank() != 0:
        dist.all_reduce(out)
    return out
