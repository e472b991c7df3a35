"""Honest twin of collective_after_return.py: the all_reduce runs in a thread too, but `solution` waits for
it before returning. Must be correct, with no finding."""
import threading

import torch.distributed as dist


def solution(x):
    out = x.clone()
    worker = threading.Thread(target=dist.all_reduce, args=(out,))
    worker.start()
    worker.join()
    return out
