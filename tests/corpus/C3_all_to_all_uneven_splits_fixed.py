# pkb-corpus
# family: C3
# title: MoE token dispatch that exchanges the token counts before all_to_all_single
# patterns: all_to_all_single
# world_sizes: 2, 4
# expect: ok
# twin: C3_all_to_all_uneven_splits_bug.py
# source: pytorch/pytorch#140563
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
    # FIX: learn how many tokens each peer sends me before sizing the output
    counts_out = torch.tensor(send_counts, device="cuda")
    counts_in = torch.empty_like(counts_out)
    dist.all_to_all_single(counts_in, counts_out)
    out_splits = [c * HIDDEN for c in counts_in.tolist()]
    received = torch.empty(sum(out_splits), device="cuda")
    dist.all_to_all_single(received, tokens, out_splits, in_splits)

    expected = torch.cat([torch.full((((s + 2 * rank) % 3 + 1) * HIDDEN,), float(100 * s + rank), device="cuda")
                          for s in range(world)])
    assert torch.equal(received, expected), received
    print(f"rank {rank}: received {received.numel() // HIDDEN} tokens")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
