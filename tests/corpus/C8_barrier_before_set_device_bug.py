# pkb-corpus
# family: C8
# title: barrier issued before torch.cuda.set_device, so every rank runs it on cuda:0
# patterns: barrier, set_device, all_reduce
# world_sizes: 2, 4
# expect: protocol
# twin: C8_barrier_before_set_device_fixed.py
# source: NVIDIA/nccl#1906
# bug_line: 22
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    world = dist.get_world_size()
    # BUG: the device of this process is not bound yet; the barrier's NCCL communicator is
    # created on the current device, which is cuda:0 for every rank
    dist.barrier()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)

    x = torch.full((256,), float(rank), device="cuda")
    dist.all_reduce(x)
    print(f"rank {rank}/{world}: x[0] = {x[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
