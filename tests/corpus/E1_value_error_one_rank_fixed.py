# pkb-corpus
# family: E1
# title: ranks agree collectively on a corrupt shard and all take the same recovery path
# patterns: all_reduce, exception
# world_sizes: 2, 4
# expect: ok
# twin: E1_value_error_one_rank_bug.py
# source: pytorch/pytorch#163546
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    shard = torch.arange(256, dtype=torch.float32, device="cuda") + 256 * rank
    if rank == 1:
        shard[3] = float("nan")  # one corrupt sample, only in rank 1's shard
    # FIX: decide together; every rank sees the same flag and takes the same path
    bad = torch.isnan(shard).any().float().reshape(1)
    dist.all_reduce(bad, op=dist.ReduceOp.MAX)
    if bad.item() > 0:
        shard = torch.nan_to_num(shard, nan=0.0)  # drop the corrupt sample everywhere
    total = shard.sum().reshape(1)
    dist.all_reduce(total)

    expected = float(sum(range(256 * world)) - (256 + 3))
    assert bad.item() == 1.0
    assert torch.equal(total, torch.tensor([expected], device="cuda")), total
    print(f"rank {rank}: total {total.item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
