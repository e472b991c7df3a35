"""expect: pass - the reference itself (a control: predicted speed-up 1)."""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
