"""Hostile: spins the CPU in `solution` and never returns. Must end "error" with the sandbox's one-line
verdict naming its cap on CPU time per process, before the job's wall-clock timeout."""
import torch.distributed as dist


def solution(x):
    while True:
        pass
    out = x.clone()
    dist.all_reduce(out)
    return out
