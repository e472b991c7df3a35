# pkb-corpus
# family: S2
# title: each async all_reduce is waited on before its staging buffer is reused
# patterns: all_reduce, async_op
# world_sizes: 2, 4
# expect: ok
# twin: S2_async_work_not_waited_bug.py
# source: pytorch/pytorch#188655
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    staging = torch.empty(1024, device="cuda")
    buckets = [torch.full((1024,), float((b + 1) * (rank + 1)), device="cuda") for b in range(2)]
    reduced = []
    for bucket in buckets:
        staging.copy_(bucket)
        work = dist.all_reduce(staging, async_op=True)
        work.wait()  # FIX: finish with the buffer before it is reused
        reduced.append(staging.clone())

    tri = world * (world + 1) // 2
    for b, t in enumerate(reduced):
        assert torch.equal(t, torch.full((1024,), float((b + 1) * tri), device="cuda"))
    print(f"rank {rank}: reduced {[t[0].item() for t in reduced]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
