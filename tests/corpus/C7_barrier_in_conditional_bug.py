# pkb-corpus
# family: C7
# title: barrier inside `if rank == 0` meets the other ranks' all_reduce
# patterns: barrier, all_reduce
# world_sizes: 2, 4
# expect: mismatch
# twin: C7_barrier_in_conditional_fixed.py
# source: pytorch/pytorch#54059
# bug_line: 30
import os

import torch
import torch.distributed as dist


def save_checkpoint(t):
    return t.clone()  # stands in for torch.save


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    grad = torch.full((1024,), float(rank), device="cuda")
    if rank == 0:
        save_checkpoint(grad)
        # BUG: only rank 0 reaches this barrier; it is matched with the others' all_reduce below
        dist.barrier()
    dist.all_reduce(grad)

    print(f"rank {rank}: grad[0] = {grad[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
