# pkb-corpus
# family: C3
# title: ZeRO step (reduce_scatter_tensor + all_gather_into_tensor) with the same parameters everywhere
# patterns: reduce_scatter_tensor, all_gather_into_tensor
# world_sizes: 2, 4
# expect: ok
# twin: C3_zero_reduce_scatter_bug.py
# source: NVIDIA/nccl#1417
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
    param_sizes.append(4)  # FIX: the logit scale is registered on every rank
    numel = sum(param_sizes)
    chunk = (numel + world - 1) // world
    flat_grad = torch.zeros(chunk * world, device="cuda")
    flat_grad[:numel] = float(rank + 1)

    grad_shard = torch.empty(chunk, device="cuda")
    dist.reduce_scatter_tensor(grad_shard, flat_grad)
    param_shard = -0.5 * grad_shard  # optimizer step on the local shard
    params = torch.empty(chunk * world, device="cuda")
    dist.all_gather_into_tensor(params, param_shard)

    total = world * (world + 1) / 2
    assert torch.equal(params[:numel], torch.full((numel,), -0.5 * total, device="cuda"))
    assert torch.equal(params[numel:], torch.zeros(chunk * world - numel, device="cuda"))
    print(f"rank {rank}: params[0] = {params[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
