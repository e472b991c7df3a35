# pkb-corpus
# family: E1
# title: rank 1 raises ValueError on a corrupt shard while the others enter the all_reduce
# patterns: all_reduce, exception
# world_sizes: 2, 4
# expect: error
# twin: E1_value_error_one_rank_fixed.py
# source: pytorch/pytorch#163546
# bug_line: 27
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    shard = torch.arange(256, dtype=torch.float32, device="cuda") + 256 * rank
    if rank == 1:
        shard[3] = float("nan")  # one corrupt sample, only in rank 1's shard
    if torch.isnan(shard).any():
        # BUG: only rank 1 raises; the other ranks block in the all_reduce below
        raise ValueError(f"rank {rank}: NaN in the input shard")
    total = shard.sum().reshape(1)
    dist.all_reduce(total)

    print(f"rank {rank}: total {total.item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
