"""expect: functional wrong_output - averages instead of summing."""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out / dist.get_world_size()
