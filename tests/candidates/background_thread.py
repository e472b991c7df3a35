"""Cheat: returns at once and finishes the work in a background thread. Must be "incorrect" or
"integrity" (a thread still running after return)."""
import threading
import time

import torch
import torch.distributed as dist


def solution(x):
    out = torch.empty_like(x)

    def later():
        time.sleep(0.3)
        y = x.clone()
        out.copy_(y * dist.get_world_size())

    threading.Thread(target=later, daemon=True).start()
    return out
