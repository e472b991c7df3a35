# pkb-corpus
# family: C4
# title: token count all_reduce with an explicit dtype on every rank
# patterns: all_reduce
# world_sizes: 2, 4
# expect: ok
# twin: C4_token_count_dtype_bug.py
# source: pytorch/pytorch#140563
import os

import torch
import torch.distributed as dist


def count_tokens(mask):
    return mask.sum().item()  # a Python int for a bool mask, a Python float for a float mask


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    mask = torch.arange(64, device="cuda") % (rank + 2) != 0
    if rank == 0:
        mask = mask.float()  # rank 0's loader yields soft (float) masks
    # FIX: pin the dtype instead of letting torch.tensor infer it
    n_tokens = torch.tensor([count_tokens(mask)], dtype=torch.float32, device="cuda")
    dist.all_reduce(n_tokens)

    expected = sum(sum(1 for i in range(64) if i % (r + 2) != 0) for r in range(world))
    assert torch.equal(n_tokens, torch.tensor([float(expected)], device="cuda")), n_tokens
    print(f"rank {rank}: {n_tokens.dtype} total tokens {n_tokens.item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
