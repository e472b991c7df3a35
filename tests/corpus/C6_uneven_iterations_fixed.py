# pkb-corpus
# family: C6
# title: ranks agree on the smallest number of batches before the training loop
# patterns: all_reduce
# world_sizes: 2, 4
# expect: ok
# twin: C6_uneven_iterations_bug.py
# source: microsoft/PyMarlin#80
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    samples = 12 + 4 * rank  # the shards are uneven
    n_batches = samples // 4
    # FIX: every rank runs the same number of steps (drop the tail, like drop_last)
    n = torch.tensor([n_batches], device="cuda")
    dist.all_reduce(n, op=dist.ReduceOp.MIN)
    for i in range(int(n.item())):
        grad = torch.full((512,), float(i + 1), device="cuda")
        dist.all_reduce(grad)
        assert torch.equal(grad, torch.full((512,), float(world * (i + 1)), device="cuda"))
        if rank == 0:
            print(f"batch {i}: grad {grad[0].item()}")
    assert int(n.item()) == 3
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
