# pkb-corpus
# family: S3
# title: async all_reduces on two communicators issued in the same order on every rank
# patterns: new_group, all_reduce, async_op
# world_sizes: 2, 4
# expect: ok
# twin: S3_two_comms_async_order_bug.py
# source: NVIDIA/nccl#217
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    dp_group = dist.new_group(list(range(world)))  # communicator A: gradients
    ep_group = dist.new_group(list(range(world)))  # communicator B: expert gradients
    dense = torch.full((1024,), float(rank), device="cuda")
    expert = torch.full((512,), float(2 * rank), device="cuda")
    # FIX: every rank launches A, then B
    work_a = dist.all_reduce(dense, group=dp_group, async_op=True)
    work_b = dist.all_reduce(expert, group=ep_group, async_op=True)
    work_a.wait()
    work_b.wait()

    tri = world * (world - 1) // 2
    assert torch.equal(dense, torch.full((1024,), float(tri), device="cuda"))
    assert torch.equal(expert, torch.full((512,), float(2 * tri), device="cuda"))
    print(f"rank {rank}: dense {dense[0].item()} expert {expert[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
