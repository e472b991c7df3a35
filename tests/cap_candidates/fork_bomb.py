"""Hostile: a fork bomb in `solution`: every process forks, 8 times over (256 processes per rank: bounded,
so that a broken cap cannot take the machine down), and all of them wait. Must end "error" with the
sandbox's one-line verdict naming its cap on processes and threads, not a timeout."""
import os
import time

import torch.distributed as dist


def solution(x):
    for _ in range(8):
        os.fork()
    time.sleep(120)
    out = x.clone()
    dist.all_reduce(out)
    return out
