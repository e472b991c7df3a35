# pkb-corpus
# family: C8
# title: seed broadcast issued before torch.cuda.set_device, so every rank uses cuda:0
# patterns: broadcast, set_device, all_reduce
# world_sizes: 2, 4
# expect: protocol
# twin: C8_collective_before_set_device_fixed.py
# source: NVIDIA/nccl#1906
# bug_line: 18
import os

import torch
import torch.distributed as dist


def shared_seed(rank):
    seed = torch.tensor([1234 if rank == 0 else 0], device="cuda")
    dist.broadcast(seed, src=0)  # every rank shuffles its data with rank 0's seed
    return int(seed.item())


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    world = dist.get_world_size()
    # BUG: called before the device is bound: "cuda" means cuda:0 on every rank, so the first
    # NCCL communicator has all ranks on the same GPU
    seed = shared_seed(rank)
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)

    torch.manual_seed(seed)
    x = torch.full((256,), float(rank), device="cuda")
    dist.all_reduce(x)
    print(f"rank {rank}/{world}: seed {seed} x[0] = {x[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
