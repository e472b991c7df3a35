"""Broken on GPUs: an out-of-bounds gather triggers a device-side assert. Must be "error" (cuda_error)."""
import torch
import torch.distributed as dist


def solution(x):
    idx = torch.full((4,), x.numel() * 1000, device=x.device, dtype=torch.long)
    bad = x[idx]  # device-side assert: index out of bounds
    out = x.clone()
    dist.all_reduce(out)
    return out + bad.sum() * 0
