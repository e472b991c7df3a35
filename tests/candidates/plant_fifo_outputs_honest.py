"""Honest twin of plant_fifo_outputs.py: the same all_reduce; it makes a FIFO too, but in its own
temporary folder, away from the outputs. Must be correct, with no finding."""
import os
import tempfile

import torch.distributed as dist


def solution(x):
    path = os.path.join(tempfile.gettempdir(), f"fifo-{dist.get_rank()}")
    if not os.path.exists(path):
        os.mkfifo(path)
    out = x.clone()
    dist.all_reduce(out)
    return out
