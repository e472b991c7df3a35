# pkb-corpus
# family: C5
# title: gradient-norm all_reduce with MAX on one rank and SUM on the others
# patterns: all_reduce
# world_sizes: 2, 4
# expect: mismatch
# twin: C5_reduce_op_fixed.py
# source: tensorflow/benchmarks#432
# bug_line: 31
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    grads = torch.arange(256, dtype=torch.float32, device="cuda") / 256 + rank
    norm_type = float("inf") if rank == 0 else 2.0  # rank 0 parsed a stale clip-norm config
    if norm_type == float("inf"):
        local = grads.abs().max().reshape(1)
        op = dist.ReduceOp.MAX
    else:
        local = grads.pow(2).sum().reshape(1)
        op = dist.ReduceOp.SUM
    # BUG: same shape and dtype, but the reduction op differs between ranks
    dist.all_reduce(local, op=op)
    total_norm = local if norm_type == float("inf") else local.sqrt()

    print(f"rank {rank}: total norm {total_norm.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
