"""Broken: raises on rank 1. Must be "error" with the rank and the message."""
import torch.distributed as dist


def solution(x):
    if dist.get_rank() == 1:
        raise ValueError("bad shape on rank 1")
    return x.clone()
