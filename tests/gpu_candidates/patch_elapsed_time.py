"""Cheat (GPU): replaces torch.cuda.Event.elapsed_time to report a tenth. Must be "integrity" (the name is
watched, and the times disagree with the scorer's clock)."""
import torch
import torch.distributed as dist

_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 10


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
