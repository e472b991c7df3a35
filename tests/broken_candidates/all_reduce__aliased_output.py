"""expect: functional aliased_output - reduces in place and returns its input: the right values, but the
GPU scorer rejects an output that shares memory with an input (the reference returns new memory), and the
call changes its input. The fixed twin is all_reduce__reference.py."""
import torch.distributed as dist


def solution(x):
    dist.all_reduce(x)
    return x
