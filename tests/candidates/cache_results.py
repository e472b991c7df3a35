"""Cheat: computes once, then returns the cached result for every later call. Must be "incorrect"."""
import torch.distributed as dist

_cache = {}


def solution(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _cache:
        out = x.clone()
        dist.all_reduce(out)
        _cache[key] = out
    return _cache[key].clone()
