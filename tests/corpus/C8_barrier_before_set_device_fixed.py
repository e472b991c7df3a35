# pkb-corpus
# family: C8
# title: torch.cuda.set_device before the first collective
# patterns: barrier, set_device, all_reduce
# world_sizes: 2, 4
# expect: ok
# twin: C8_barrier_before_set_device_bug.py
# source: NVIDIA/nccl#1906
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    world = dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)  # FIX: bind the device before any collective
    dist.barrier()

    x = torch.full((256,), float(rank), device="cuda")
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((256,), float(world * (world - 1) // 2), device="cuda"))
    print(f"rank {rank}/{world}: x[0] = {x[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
