# pkb-corpus
# family: G1
# title: new_group([0, 1]) called only by its members
# patterns: new_group, all_reduce, device_id
# world_sizes: 4, 8
# expect: deadlock
# twin: G1_new_group_subset_fixed.py
# source: pytorch/pytorch#25390
# bug_line: 27
import os

import torch
import torch.distributed as dist


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    # eager init: with a bound device, new_group splits the WORLD communicator (ncclCommSplit)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()

    x = torch.full((64,), float(rank), device="cuda")
    if rank < 2:
        # BUG: new_group is collective over the whole world (every rank must join the split);
        # ranks 2.. never enter it
        pair = dist.new_group([0, 1])
        dist.all_reduce(x, group=pair)

    print(f"rank {rank}: x[0] = {x[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
