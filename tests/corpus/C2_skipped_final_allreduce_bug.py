# pkb-corpus
# family: C2
# title: a rank without validation data skips the final all_reduce of the metrics
# patterns: all_reduce
# world_sizes: 2, 4
# expect: deadlock
# twin: C2_skipped_final_allreduce_fixed.py
# source: pytorch/pytorch#138322
# bug_line: 32
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    grad = torch.ones(256, device="cuda")
    dist.all_reduce(grad)  # training step: every rank takes part

    n_val = 0 if rank == world - 1 else 2  # the last rank's validation shard is empty
    totals = torch.zeros(2, device="cuda")  # [loss sum, sample count]
    for i in range(n_val):
        totals += torch.tensor([float(rank + i), 1.0], device="cuda")
    if n_val > 0:
        # BUG: the rank with no validation batches skips the reduction; the others wait for it forever
        dist.all_reduce(totals)

    if rank == 0:
        print("val loss", (totals[0] / totals[1]).item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
