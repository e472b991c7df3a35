# pkb-corpus
# family: C3
# title: gradient buckets of different sizes because one rank froze a layer
# patterns: all_reduce
# world_sizes: 2, 4
# expect: mismatch
# twin: C3_allreduce_numel_fixed.py
# source: NVIDIA/nccl#1394
# bug_line: 27
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    layer_sizes = [512, 256, 128]
    frozen = {1} if rank == 0 else set()  # rank 0 read a stale config that freezes layer 1
    grads = [torch.full((n,), 1.0, device="cuda") for i, n in enumerate(layer_sizes) if i not in frozen]
    bucket = torch.cat(grads)  # 640 elements on rank 0, 896 on the others
    # BUG: the flattened bucket has a different numel on rank 0
    dist.all_reduce(bucket)

    print(f"rank {rank}: bucket {bucket.numel()} elements, first {bucket[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
