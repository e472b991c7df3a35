# pkb-corpus
# family: G2
# title: tp/dp groups created in one global order on every rank
# patterns: new_group, all_reduce
# world_sizes: 4, 8
# expect: ok
# twin: G2_new_group_order_bug.py
# source: openxla/xla#36981
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    tp = 2
    tp_lists = [list(range(i, i + tp)) for i in range(0, world, tp)]
    dp_lists = [list(range(j, world, tp)) for j in range(tp)]
    specs = tp_lists + dp_lists  # FIX: the same order on every rank, no per-rank sorting
    groups = {tuple(ranks): dist.new_group(ranks) for ranks in specs}

    tp_group = groups[tuple(next(r for r in tp_lists if rank in r))]
    dp_group = groups[tuple(next(r for r in dp_lists if rank in r))]
    x = torch.full((32,), float(rank), device="cuda")
    dist.all_reduce(x, group=tp_group)
    dist.all_reduce(x, group=dp_group)
    # after both reductions every rank holds the sum over all ranks
    assert torch.equal(x, torch.full((32,), float(world * (world - 1) // 2), device="cuda")), x
    print(f"rank {rank}: x[0] = {x[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
