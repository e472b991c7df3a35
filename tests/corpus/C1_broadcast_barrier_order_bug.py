# pkb-corpus
# family: C1
# title: rank 0 broadcasts then waits at a barrier while the others wait at the barrier first
# patterns: broadcast, barrier
# world_sizes: 2, 4
# expect: mismatch
# twin: C1_broadcast_barrier_order_fixed.py
# source: pytorch/pytorch#54059
# bug_line: 30
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
        dist.broadcast(params, src=0)
        dist.barrier()  # "checkpoint is ready"
    else:
        # BUG: the other ranks wait for the checkpoint with a barrier first, so their barrier
        # meets rank 0's broadcast and their broadcast meets rank 0's barrier
        dist.barrier()
        dist.broadcast(params, src=0)

    print(f"rank {rank}: params[0] = {params[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
