# pkb-corpus
# family: C3
# title: all_gather_into_tensor of shards padded to the same size
# patterns: all_gather_into_tensor
# world_sizes: 2, 4
# expect: ok
# twin: C3_allgather_into_tensor_numel_bug.py
# source: NVIDIA/nccl#1417
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
    part = flat[rank * chunk:(rank + 1) * chunk]
    shard = torch.zeros(chunk, device="cuda")  # FIX: pad every shard to the same length
    shard[:part.numel()] = part
    out = torch.empty(world * chunk, device="cuda")
    dist.all_gather_into_tensor(out, shard)

    assert torch.equal(out[:numel], flat)
    assert torch.equal(out[numel:], torch.zeros(world * chunk - numel, device="cuda"))
    print(f"rank {rank}: gathered {out.numel()} elements")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
