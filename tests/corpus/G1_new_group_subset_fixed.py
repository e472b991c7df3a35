# pkb-corpus
# family: G1
# title: every rank calls new_group([0, 1]); only the members use it
# patterns: new_group, all_reduce, device_id
# world_sizes: 4, 8
# expect: ok
# twin: G1_new_group_subset_bug.py
# source: pytorch/pytorch#25390
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
    pair = dist.new_group([0, 1])  # FIX: every rank enters new_group, members or not
    if rank < 2:
        dist.all_reduce(x, group=pair)
        assert torch.equal(x, torch.full((64,), 1.0, device="cuda"))
    else:
        assert torch.equal(x, torch.full((64,), float(rank), device="cuda"))

    print(f"rank {rank}: x[0] = {x[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
