# pkb-corpus
# family: C7
# title: barrier outside the rank conditional, reached by every rank
# patterns: barrier, all_reduce
# world_sizes: 2, 4
# expect: ok
# twin: C7_barrier_in_conditional_bug.py
# source: pytorch/pytorch#54059
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
    world = dist.get_world_size()

    grad = torch.full((1024,), float(rank), device="cuda")
    if rank == 0:
        save_checkpoint(grad)
    dist.barrier()  # FIX: every rank waits here, not only rank 0
    dist.all_reduce(grad)

    assert torch.equal(grad, torch.full((1024,), float(world * (world - 1) // 2), device="cuda"))
    print(f"rank {rank}: grad[0] = {grad[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
