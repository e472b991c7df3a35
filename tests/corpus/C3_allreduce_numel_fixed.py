# pkb-corpus
# family: C3
# title: gradient buckets of equal size on every rank
# patterns: all_reduce
# world_sizes: 2, 4
# expect: ok
# twin: C3_allreduce_numel_bug.py
# source: NVIDIA/nccl#1394
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    layer_sizes = [512, 256, 128]
    frozen = set()  # FIX: the set of trainable layers is the same on every rank
    grads = [torch.full((n,), 1.0, device="cuda") for i, n in enumerate(layer_sizes) if i not in frozen]
    bucket = torch.cat(grads)
    dist.all_reduce(bucket)

    assert torch.equal(bucket, torch.full((896,), float(world), device="cuda"))
    print(f"rank {rank}: bucket {bucket.numel()} elements, first {bucket[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
