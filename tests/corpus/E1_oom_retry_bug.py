# pkb-corpus
# family: E1
# title: OOM-like RuntimeError on rank 1, retried with the same micro-batch until it re-raises
# patterns: all_reduce, exception
# world_sizes: 2, 4
# expect: error
# twin: E1_oom_retry_fixed.py
# source: HabanaAI/vllm-fork#417
# bug_line: 31
import os

import torch
import torch.distributed as dist


def local_step(x, rank):
    # stands in for forward + backward: rank 1 shares its GPU and only fits 128 rows at once
    if rank == 1 and x.shape[0] > 128:
        raise RuntimeError("CUDA out of memory. Tried to allocate 1.50 GiB")
    return x.sum(dim=0)


def step_with_retry(x, rank, retries=2):
    for attempt in range(retries + 1):
        try:
            return local_step(x, rank)
        except RuntimeError as e:
            if "out of memory" not in str(e) or attempt == retries:
                # BUG: every retry uses the same micro-batch, so rank 1 finally re-raises
                # while the other ranks already wait in the all_reduce
                raise
            torch.cuda.empty_cache()


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    x = torch.ones(512, 8, device="cuda") * (rank + 1)
    grad = step_with_retry(x, rank)
    dist.all_reduce(grad)

    print(f"rank {rank}: grad[0] = {grad[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
