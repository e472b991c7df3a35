"""Broken: rank 1's process exits at once, reporting nothing. Must be "error": a rank died without reporting."""
import os

import torch.distributed as dist


def solution(x):
    if dist.get_rank() == 1:
        os._exit(1)
    return x.clone()
