# pkb-corpus
# family: C5
# title: broadcast from a source rank every rank agreed on first
# patterns: all_reduce, broadcast
# world_sizes: 2, 4
# expect: ok
# twin: C5_broadcast_src_bug.py
# source: tensorflow/benchmarks#432
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    have_ckpt = rank == world - 1  # only the last rank finds the checkpoint on its local disk
    weights = torch.zeros(1024, device="cuda")
    if have_ckpt:
        weights.fill_(7.0)
    # FIX: agree on the owner first, then every rank broadcasts from the same src
    owner = torch.tensor([rank if have_ckpt else -1], device="cuda")
    dist.all_reduce(owner, op=dist.ReduceOp.MAX)
    src = int(owner.item())
    dist.broadcast(weights, src=src)

    assert src == world - 1
    assert torch.equal(weights, torch.full((1024,), 7.0, device="cuda"))
    print(f"rank {rank}: weights[0] = {weights[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
