"""expect: functional error - rank 1 hits a shape bug the other ranks do not."""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    if dist.get_rank() == 1:
        out = out.view(3, -1)  # 4096 elements do not split into 3 rows
    dist.all_reduce(out)
    return out
