# pkb-corpus
# family: C8
# title: each rank binds its own GPU from LOCAL_RANK before creating tensors
# patterns: all_reduce, set_device
# world_sizes: 2, 4
# expect: ok
# twin: C8_all_ranks_on_cuda0_bug.py
# source: yiqiao-yin/deepspeed-course#17
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    world = dist.get_world_size()
    print(f"rank {rank} of {world}, LOCAL_RANK={os.environ['LOCAL_RANK']}")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)  # FIX: one GPU per rank

    x = torch.full((256,), float(rank)).cuda()
    dist.all_reduce(x)

    assert torch.equal(x, torch.full((256,), float(world * (world - 1) // 2), device="cuda"))
    print(f"rank {rank}: x[0] = {x[0].item()} on {x.device}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
