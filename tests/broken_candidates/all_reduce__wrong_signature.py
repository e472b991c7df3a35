"""expect: static signature - takes two parameters where the task passes one."""
import torch.distributed as dist


def solution(x, scale):
    out = x.clone() * scale
    dist.all_reduce(out)
    return out
