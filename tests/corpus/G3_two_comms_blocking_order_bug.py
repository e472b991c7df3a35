# pkb-corpus
# family: G3
# title: blocking all_reduces on two communicators in different relative orders
# patterns: new_group, all_reduce
# world_sizes: 2, 4
# expect: deadlock
# twin: G3_two_comms_blocking_order_fixed.py
# source: NVIDIA/nccl#195
# bug_line: 32
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    grad_group = dist.new_group(list(range(world)))  # a second communicator for gradient sync
    loss = torch.full((1,), float(rank), device="cuda")
    grad = torch.ones(1024, device="cuda")
    if rank == 0:
        dist.all_reduce(loss)  # the logging rank reduces the loss first
        dist.all_reduce(grad, group=grad_group)
    else:
        # BUG: the other ranks start with the gradient communicator: each side waits in a
        # different communicator for a peer that is blocked in the other one
        dist.all_reduce(grad, group=grad_group)
        dist.all_reduce(loss)

    print(f"rank {rank}: loss {loss.item()} grad {grad[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
