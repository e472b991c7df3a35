"""expect: functional mismatch - the last rank issues a different collective than the others."""
import torch
import torch.distributed as dist


def solution(x):
    out = x.clone()
    if dist.get_rank() == dist.get_world_size() - 1:
        parts = [torch.empty_like(out) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, out)
        return torch.stack(parts).sum(0)
    dist.all_reduce(out)
    return out
