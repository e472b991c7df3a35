# pkb-corpus
# family: C5
# title: gradient-norm all_reduce with the same norm type and reduce op on every rank
# patterns: all_reduce
# world_sizes: 2, 4
# expect: ok
# twin: C5_reduce_op_bug.py
# source: tensorflow/benchmarks#432
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    grads = torch.arange(256, dtype=torch.float32, device="cuda") / 256 + rank
    norm_type = 2.0  # FIX: one clip-norm config for every rank
    if norm_type == float("inf"):
        local = grads.abs().max().reshape(1)
        op = dist.ReduceOp.MAX
    else:
        local = grads.pow(2).sum().reshape(1)
        op = dist.ReduceOp.SUM
    dist.all_reduce(local, op=op)
    total_norm = local if norm_type == float("inf") else local.sqrt()

    every = torch.cat([torch.arange(256, dtype=torch.float32) / 256 + r for r in range(world)])
    assert torch.allclose(total_norm.cpu(), every.pow(2).sum().sqrt().reshape(1)), total_norm
    print(f"rank {rank}: total norm {total_norm.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
