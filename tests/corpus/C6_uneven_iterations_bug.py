# pkb-corpus
# family: C6
# title: data-dependent number of batches per rank, one gradient all_reduce per batch
# patterns: all_reduce
# world_sizes: 2, 4
# expect: deadlock
# twin: C6_uneven_iterations_fixed.py
# source: microsoft/PyMarlin#80
# bug_line: 27
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    samples = 12 + 4 * rank  # the shards are uneven
    n_batches = samples // 4  # 3 batches on rank 0, 4 on rank 1, ...
    for i in range(n_batches):
        grad = torch.full((512,), float(i + 1), device="cuda")
        # BUG: ranks with more batches issue extra all_reduces that nobody else joins
        dist.all_reduce(grad)
        if rank == 0:
            print(f"batch {i}: grad {grad[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
