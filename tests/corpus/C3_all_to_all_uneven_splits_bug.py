# pkb-corpus
# family: C3
# title: MoE token dispatch with all_to_all_single whose output splits assume symmetric routing
# patterns: all_to_all_single
# world_sizes: 2, 4
# expect: mismatch
# twin: C3_all_to_all_uneven_splits_fixed.py
# source: pytorch/pytorch#140563
# bug_line: 34
import os

import torch
import torch.distributed as dist

HIDDEN = 4


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    # tokens this rank routes to the experts on each rank (uneven and not symmetric)
    send_counts = [(rank + 2 * d) % 3 + 1 for d in range(world)]
    tokens = torch.cat([torch.full((c * HIDDEN,), float(100 * rank + d), device="cuda")
                        for d, c in enumerate(send_counts)])
    in_splits = [c * HIDDEN for c in send_counts]
    # BUG: assumes every peer sends me as many tokens as I send it; rank r's output split for
    # peer p must equal peer p's input split for r
    out_splits = list(in_splits)
    received = torch.empty(sum(out_splits), device="cuda")
    dist.all_to_all_single(received, tokens, out_splits, in_splits)

    print(f"rank {rank}: received {received.numel() // HIDDEN} tokens")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
