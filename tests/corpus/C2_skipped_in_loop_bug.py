# pkb-corpus
# family: C2
# title: a rank skips one gradient all_reduce in the middle of the loop (same shape every step)
# patterns: all_reduce
# world_sizes: 2, 4
# expect: deadlock
# twin: C2_skipped_in_loop_fixed.py
# source: pytorch/pytorch#163546
# bug_line: 30
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    sizes = [4, 4, 0 if rank == 1 else 4, 4]  # rank 1's third batch is empty after filtering
    for step, size in enumerate(sizes):
        batch = torch.full((size,), float(step + 1), device="cuda")
        if batch.numel() == 0:
            # BUG: skipping the step also skips its all_reduce; later steps pair off by one
            # (same shape, so nothing complains) and the other ranks' last all_reduce never completes
            continue
        grad = batch.sum() * torch.ones(256, device="cuda")
        dist.all_reduce(grad)
        if rank == 0:
            print(f"step {step}: grad {grad[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
