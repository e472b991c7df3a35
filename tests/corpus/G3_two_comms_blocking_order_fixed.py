# pkb-corpus
# family: G3
# title: blocking all_reduces on two communicators in the same order on every rank
# patterns: new_group, all_reduce
# world_sizes: 2, 4
# expect: ok
# twin: G3_two_comms_blocking_order_bug.py
# source: NVIDIA/nccl#195
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
    # FIX: one order for every rank: loss on the default group, then gradients
    dist.all_reduce(loss)
    dist.all_reduce(grad, group=grad_group)

    assert torch.equal(loss, torch.full((1,), float(world * (world - 1) // 2), device="cuda"))
    assert torch.equal(grad, torch.full((1024,), float(world), device="cuda"))
    print(f"rank {rank}: loss {loss.item()} grad {grad[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
