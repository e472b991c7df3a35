# pkb-corpus
# family: C1
# title: all_reduce and all_gather issued in different orders on different ranks
# patterns: all_reduce, all_gather
# world_sizes: 2, 4
# expect: mismatch
# twin: C1_allreduce_allgather_order_fixed.py
# source: NVIDIA/nccl#296
# bug_line: 29
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    loss = torch.full((4,), float(rank + 1), device="cuda")
    preds = torch.arange(8, dtype=torch.float32, device="cuda") + 8 * rank
    gathered = [torch.empty(8, device="cuda") for _ in range(world)]

    if rank == 0:
        # BUG: the logging rank gathers the predictions first; the other ranks reduce the loss first
        dist.all_gather(gathered, preds)
        dist.all_reduce(loss)
    else:
        dist.all_reduce(loss)
        dist.all_gather(gathered, preds)

    if rank == 0:
        print("loss", loss[0].item(), "preds", torch.cat(gathered)[:4].tolist())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
