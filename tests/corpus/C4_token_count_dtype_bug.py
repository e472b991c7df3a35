# pkb-corpus
# family: C4
# title: token count all_reduce with float32 on one rank and int64 on the others
# patterns: all_reduce
# world_sizes: 2, 4
# expect: mismatch
# twin: C4_token_count_dtype_fixed.py
# source: pytorch/pytorch#140563
# bug_line: 31
import os

import torch
import torch.distributed as dist


def count_tokens(mask):
    return mask.sum().item()  # a Python int for a bool mask, a Python float for a float mask


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    mask = torch.arange(64, device="cuda") % (rank + 2) != 0
    if rank == 0:
        mask = mask.float()  # rank 0's loader yields soft (float) masks
    # BUG: torch.tensor infers the dtype from the Python scalar: float32 on rank 0, int64 elsewhere
    n_tokens = torch.tensor([count_tokens(mask)], device="cuda")
    dist.all_reduce(n_tokens)

    print(f"rank {rank}: {n_tokens.dtype} total tokens {n_tokens.item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
