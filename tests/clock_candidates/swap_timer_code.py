"""Cheat: the honest sleeper's work, but the code of the scorer's own timer (Guard.stop_timer) is swapped
for one that reports a tenth of the time. The function object stays the same one, so no check of names
sees it (at d7af08b it was scored "slower" with no finding). Must be "integrity": the worker's times
disagree with the scorer's clock."""
import time

import torch.distributed as dist

from hwbackend.guard import Guard


def _tenth(self, start):
    if self.event is None:
        return (self.clock() - start) / 10
    end = self.event(enable_timing=True)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e4


Guard.stop_timer.__code__ = _tenth.__code__


def solution(x):
    time.sleep(0.05)
    out = x.clone()
    dist.all_reduce(out)
    return out
