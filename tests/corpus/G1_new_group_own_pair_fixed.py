# pkb-corpus
# family: G1
# title: every rank creates every pair group in the same order and keeps its own
# patterns: new_group, all_reduce
# world_sizes: 4, 8
# expect: ok
# twin: G1_new_group_own_pair_bug.py
# source: pytorch/pytorch#25390
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    first = rank // 2 * 2
    # FIX: all ranks create all pair groups, in one order, and each keeps the one it belongs to
    pairs = [dist.new_group([i, i + 1]) for i in range(0, world, 2)]
    pair = pairs[rank // 2]

    x = torch.full((64,), float(rank), device="cuda")
    dist.all_reduce(x, group=pair)
    assert torch.equal(x, torch.full((64,), float(2 * first + 1), device="cuda"))
    print(f"rank {rank}: x[0] = {x[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
