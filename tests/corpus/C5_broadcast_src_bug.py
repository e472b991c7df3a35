# pkb-corpus
# family: C5
# title: broadcast whose src differs between ranks (the checkpoint owner broadcasts as itself)
# patterns: broadcast
# world_sizes: 2, 4
# expect: mismatch
# twin: C5_broadcast_src_fixed.py
# source: tensorflow/benchmarks#432
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

    have_ckpt = rank == world - 1  # only the last rank finds the checkpoint on its local disk
    weights = torch.zeros(1024, device="cuda")
    if have_ckpt:
        weights.fill_(7.0)
    # BUG: the owner broadcasts with src=itself while the others assume rank 0 is the source
    src = rank if have_ckpt else 0
    dist.broadcast(weights, src=src)

    print(f"rank {rank}: weights[0] = {weights[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
