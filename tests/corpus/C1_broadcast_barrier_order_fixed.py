# pkb-corpus
# family: C1
# title: barrier then broadcast, in the same order on every rank
# patterns: broadcast, barrier
# world_sizes: 2, 4
# expect: ok
# twin: C1_broadcast_barrier_order_bug.py
# source: pytorch/pytorch#54059
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    params = torch.zeros(1024, device="cuda")
    if rank == 0:
        params.fill_(3.0)  # stands in for loading a checkpoint
    # FIX: one sequence for everybody: wait until the checkpoint is ready, then receive it
    dist.barrier()
    dist.broadcast(params, src=0)

    assert torch.equal(params, torch.full((1024,), 3.0, device="cuda"))
    print(f"rank {rank}: params[0] = {params[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
