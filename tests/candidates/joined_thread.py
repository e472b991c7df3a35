"""Honest twin of background_thread.py: the same work in a thread, joined before `solution` returns."""
import threading

import torch
import torch.distributed as dist


def solution(x):
    out = torch.empty_like(x)

    def work():
        y = x.clone()
        dist.all_reduce(y)
        out.copy_(y)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return out
