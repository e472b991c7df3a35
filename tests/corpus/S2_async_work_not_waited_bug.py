# pkb-corpus
# family: S2
# title: buffer refilled for the next bucket while its async all_reduce is still in flight
# patterns: all_reduce, async_op
# world_sizes: 2, 4
# expect: protocol
# twin: S2_async_work_not_waited_fixed.py
# source: pytorch/pytorch#188655
# bug_line: 28
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    staging = torch.empty(1024, device="cuda")
    buckets = [torch.full((1024,), float((b + 1) * (rank + 1)), device="cuda") for b in range(2)]
    reduced = []
    for bucket in buckets:
        # BUG: the second iteration overwrites staging before the first all_reduce was waited on;
        # the in-flight collective may still read or write it
        staging.copy_(bucket)
        work = dist.all_reduce(staging, async_op=True)
        reduced.append(staging)
    work.wait()

    print(f"rank {rank}: reduced {[t[0].item() for t in reduced]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
