"""expect: static tampering - replaces the clock the harness times with."""
import time

import torch.distributed as dist

time.perf_counter = lambda: 0.0


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
