"""expect: functional modified_input - reduces in place and returns a copy: the right values, but the call
changes its input, which the GPU scorer rejects (the reference leaves it alone; a timing loop would feed
the sum back in). The fixed twin is all_reduce__reference.py."""
import torch.distributed as dist


def solution(x):
    dist.all_reduce(x)
    return x.clone()
