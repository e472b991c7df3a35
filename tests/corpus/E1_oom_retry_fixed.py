# pkb-corpus
# family: E1
# title: OOM-like RuntimeError on rank 1, retried locally with smaller micro-batches
# patterns: all_reduce, exception
# world_sizes: 2, 4
# expect: ok
# twin: E1_oom_retry_bug.py
# source: HabanaAI/vllm-fork#417
import os

import torch
import torch.distributed as dist


def local_step(x, rank):
    # stands in for forward + backward: rank 1 shares its GPU and only fits 128 rows at once
    if rank == 1 and x.shape[0] > 128:
        raise RuntimeError("CUDA out of memory. Tried to allocate 1.50 GiB")
    return x.sum(dim=0)


def step_with_retry(x, rank):
    micro = x.shape[0]
    while True:
        try:
            return sum(local_step(chunk, rank) for chunk in x.split(micro))
        except RuntimeError as e:
            if "out of memory" not in str(e) or micro == 1:
                raise
            torch.cuda.empty_cache()
            micro //= 2  # FIX: retry with smaller micro-batches; no collective inside the retry


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    x = torch.ones(512, 8, device="cuda") * (rank + 1)
    grad = step_with_retry(x, rank)
    dist.all_reduce(grad)

    assert torch.equal(grad, torch.full((8,), 512.0 * world * (world + 1) / 2, device="cuda"))
    print(f"rank {rank}: grad[0] = {grad[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
