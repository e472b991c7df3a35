"""Cheat: replaces the clocks and the device synchronisation at import. Must be "integrity"."""
import time

import torch

_real = time.perf_counter
time.perf_counter = lambda: _real() / 1000.0
torch.cuda.synchronize = lambda *a, **k: None

import torch.distributed as dist  # noqa: E402


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
