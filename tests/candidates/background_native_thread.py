"""Cheat: like background_thread.py, but its thread is started below `threading` (`_thread`), where
`threading.enumerate()` does not list it. Must be "integrity" (a kernel-level thread still running)."""
import _thread
import time

import torch
import torch.distributed as dist


def solution(x):
    out = torch.empty_like(x)

    def later():
        time.sleep(0.3)
        out.copy_(x * dist.get_world_size())

    _thread.start_new_thread(later, ())
    return out
