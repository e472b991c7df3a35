# pkb-corpus
# family: G2
# title: tp/dp groups created in a rank-dependent order (own groups first)
# patterns: new_group, all_reduce
# world_sizes: 4, 8
# expect: mismatch
# twin: G2_new_group_order_fixed.py
# source: openxla/xla#36981
# bug_line: 29
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
    specs = tp_lists + dp_lists
    # BUG: "create my own groups first" makes the order of new_group calls differ between ranks
    specs.sort(key=lambda ranks: rank not in ranks)
    groups = {tuple(ranks): dist.new_group(ranks) for ranks in specs}

    tp_group = groups[tuple(next(r for r in tp_lists if rank in r))]
    dp_group = groups[tuple(next(r for r in dp_lists if rank in r))]
    x = torch.full((32,), float(rank), device="cuda")
    dist.all_reduce(x, group=tp_group)
    dist.all_reduce(x, group=dp_group)
    print(f"rank {rank}: x[0] = {x[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
