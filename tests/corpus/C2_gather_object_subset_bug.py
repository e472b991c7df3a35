# pkb-corpus
# family: C2
# title: all_gather_object called only by the ranks that have evaluation results
# patterns: all_gather_object
# world_sizes: 2, 4
# expect: deadlock
# twin: C2_gather_object_subset_fixed.py
# source: pytorch/pytorch#138322
# bug_line: 28
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    scores = torch.arange(4, dtype=torch.float32, device="cuda") + rank
    results = [f"r{rank}:{s:.1f}" for s in scores.tolist()] if rank % 2 == 0 else []  # odd ranks got no samples
    gathered = [None] * world
    if results:
        # BUG: all_gather_object is a collective; the ranks with nothing to report skip it and exit
        dist.all_gather_object(gathered, results)

    if rank == 0:
        print("eval results:", gathered)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
