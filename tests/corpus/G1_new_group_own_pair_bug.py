# pkb-corpus
# family: G1
# title: each rank calls new_group only for the pair it belongs to (different rank lists)
# patterns: new_group, all_reduce
# world_sizes: 4, 8
# expect: mismatch
# twin: G1_new_group_own_pair_fixed.py
# source: pytorch/pytorch#25390
# bug_line: 25
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    first = rank // 2 * 2
    # BUG: every rank enters new_group once, but ranks 0,1 pass [0, 1] while ranks 2,3 pass [2, 3]:
    # the n-th new_group call must have the same rank list on every rank
    pair = dist.new_group([first, first + 1])

    x = torch.full((64,), float(rank), device="cuda")
    dist.all_reduce(x, group=pair)
    print(f"rank {rank}: x[0] = {x[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
