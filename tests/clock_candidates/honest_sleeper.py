"""Honest twin of the clock cheats: the reference's all_reduce plus 50 ms of waiting per call, timed as it
is. Must be correct with no finding about the clocks (it is "slower")."""
import time

import torch.distributed as dist


def solution(x):
    time.sleep(0.05)
    out = x.clone()
    dist.all_reduce(out)
    return out
