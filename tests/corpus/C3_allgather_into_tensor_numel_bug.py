# pkb-corpus
# family: C3
# title: all_gather_into_tensor of uneven shards (the last rank's shard is shorter)
# patterns: all_gather_into_tensor
# world_sizes: 2, 4
# expect: mismatch
# twin: C3_allgather_into_tensor_numel_fixed.py
# source: NVIDIA/nccl#1417
# bug_line: 29
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    numel = 1025  # not a multiple of the world size
    flat = torch.arange(numel, dtype=torch.float32, device="cuda")
    chunk = (numel + world - 1) // world
    shard = flat[rank * chunk:(rank + 1) * chunk]  # the last rank's slice is shorter
    out = torch.empty(world * shard.numel(), device="cuda")  # consistent locally, not across ranks
    # BUG: the input numel differs on the last rank
    dist.all_gather_into_tensor(out, shard)

    print(f"rank {rank}: gathered {out.numel()} elements")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
