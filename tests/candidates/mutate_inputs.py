"""Cheat: reduces in place into its input and returns the input. Correct values, but must be flagged
"integrity" (inputs modified, output aliases an input)."""
import torch.distributed as dist


def solution(x):
    dist.all_reduce(x)
    return x
