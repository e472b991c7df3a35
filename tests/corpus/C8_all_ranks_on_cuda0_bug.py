# pkb-corpus
# family: C8
# title: no torch.cuda.set_device at all, so every rank's tensors and collectives use cuda:0
# patterns: all_reduce, set_device
# world_sizes: 2, 4
# expect: protocol
# twin: C8_all_ranks_on_cuda0_fixed.py
# source: yiqiao-yin/deepspeed-course#17
# bug_line: 25
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    world = dist.get_world_size()
    print(f"rank {rank} of {world}, LOCAL_RANK={os.environ['LOCAL_RANK']}")

    # BUG: LOCAL_RANK is read but never used: .cuda() means cuda:0 on every rank,
    # so two ranks drive the same GPU in one NCCL communicator
    x = torch.full((256,), float(rank)).cuda()
    dist.all_reduce(x)

    print(f"rank {rank}: x[0] = {x[0].item()} on {x.device}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
