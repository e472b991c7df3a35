"""Cheat (GPU): the reference's all_reduce, but the code of the scorer's own timer (Guard.stop_timer) is swapped
for one that reports 80% of the CUDA events' time: a subtle shave, by a route no check of names sees. Must
be "integrity" where the cross-check's tolerance (the result's clock_check) is below 20% of a batch, and
never "faster" where it is not (the noise margin is at least that tolerance)."""
import torch.distributed as dist

from hwbackend.guard import Guard


def _shaved(self, start):
    if self.event is None:
        return (self.clock() - start) * 0.8
    end = self.event(enable_timing=True)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 0.8e-3


Guard.stop_timer.__code__ = _shaved.__code__


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
