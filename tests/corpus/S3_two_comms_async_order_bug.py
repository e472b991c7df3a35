# pkb-corpus
# family: S3
# title: async all_reduces on two communicators issued in different orders, then waited
# patterns: new_group, all_reduce, async_op
# world_sizes: 2, 4
# expect: deadlock
# twin: S3_two_comms_async_order_fixed.py
# source: NVIDIA/nccl#217
# bug_line: 34
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
    if rank == 0:
        work_a = dist.all_reduce(dense, group=dp_group, async_op=True)
        work_b = dist.all_reduce(expert, group=ep_group, async_op=True)
    else:
        # BUG: the other ranks launch B before A; the NCCL kernels of A and B are not
        # guaranteed to run concurrently, so each rank's first kernel can wait for a peer
        # that is stuck in the other communicator
        work_b = dist.all_reduce(expert, group=ep_group, async_op=True)
        work_a = dist.all_reduce(dense, group=dp_group, async_op=True)
    work_a.wait()
    work_b.wait()

    print(f"rank {rank}: dense {dense[0].item()} expert {expert[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
