# pkb-corpus
# family: C2
# title: a rank with an empty batch still joins the gradient all_reduce of that step
# patterns: all_reduce
# world_sizes: 2, 4
# expect: ok
# twin: C2_skipped_in_loop_bug.py
# source: pytorch/pytorch#163546
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    sizes = [4, 4, 0 if rank == 1 else 4, 4]  # rank 1's third batch is empty after filtering
    for step, size in enumerate(sizes):
        batch = torch.full((size,), float(step + 1), device="cuda")
        # FIX: an empty batch gives a zero gradient, and the rank still takes part in the all_reduce
        grad = batch.sum() * torch.ones(256, device="cuda")
        dist.all_reduce(grad)
        contributors = world - 1 if step == 2 else world
        assert torch.equal(grad, torch.full((256,), 4.0 * (step + 1) * contributors, device="cuda"))
        if rank == 0:
            print(f"step {step}: grad {grad[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
