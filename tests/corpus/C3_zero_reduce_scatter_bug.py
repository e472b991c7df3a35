# pkb-corpus
# family: C3
# title: ZeRO step (reduce_scatter_tensor + all_gather_into_tensor) with a different chunk size on one rank
# patterns: reduce_scatter_tensor, all_gather_into_tensor
# world_sizes: 2, 4
# expect: mismatch
# twin: C3_zero_reduce_scatter_fixed.py
# source: NVIDIA/nccl#1417
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

    param_sizes = [300, 200, 12]
    if rank == 0:
        param_sizes.append(4)  # a parameter registered under `if rank == 0` (a logit scale)
    numel = sum(param_sizes)
    chunk = (numel + world - 1) // world
    flat_grad = torch.zeros(chunk * world, device="cuda")
    flat_grad[:numel] = float(rank + 1)

    grad_shard = torch.empty(chunk, device="cuda")
    # BUG: chunk is derived from this rank's own parameter list: 129/258 elements on rank 0,
    # 128/256 on the others; every call is consistent locally but not across ranks
    dist.reduce_scatter_tensor(grad_shard, flat_grad)
    param_shard = -0.5 * grad_shard  # optimizer step on the local shard
    params = torch.empty(chunk * world, device="cuda")
    dist.all_gather_into_tensor(params, param_shard)

    print(f"rank {rank}: params[0] = {params[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
