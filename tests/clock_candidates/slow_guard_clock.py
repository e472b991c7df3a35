"""Cheat: the honest sleeper's work, but the clock the worker's Guard instance holds (found through gc) is
replaced by one running at a tenth of the speed, and so are its CUDA events on a GPU. No watched name
changes. Must be "integrity": the worker's times disagree with the scorer's clock."""
import gc
import time

import torch
import torch.distributed as dist

from hwbackend.guard import Guard

for guard in [o for o in gc.get_objects() if isinstance(o, Guard)]:
    real = guard.clock
    guard.clock = lambda: real() / 10
    if guard.event is not None:
        class _SlowEvent(torch.cuda.Event):
            def elapsed_time(self, end):
                return super().elapsed_time(end) / 10
        guard.event = _SlowEvent


def solution(x):
    time.sleep(0.05)
    out = x.clone()
    dist.all_reduce(out)
    return out
