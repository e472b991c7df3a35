# pkb-corpus
# family: P8
# title: hand-rolled all-to-all with unbatched isend/irecv, peers visited in ascending order
# patterns: isend, irecv
# world_sizes: 4, 8
# expect: ok
# twin: P8_lazy_p2p_init_order_bug.py
# source: NVIDIA/Megatron-LM#5240
# options: --lazy-p2p-init
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    out = torch.stack([torch.full((64,), float(100 * rank + p), device="cuda") for p in range(world)])
    inp = torch.empty(world, 64, device="cuda")
    # FIX: every rank visits its peers in ascending global order, so the pairs' communicators
    # are created in one consistent order (the lexicographically smallest pending pair can always proceed)
    peers = [p for p in range(world) if p != rank]
    works = []
    for p in peers:
        if rank < p:  # within a pair the lower rank sends first
            works += [dist.isend(out[p], dst=p), dist.irecv(inp[p], src=p)]
        else:
            works += [dist.irecv(inp[p], src=p), dist.isend(out[p], dst=p)]
    for w in works:
        w.wait()

    for p in peers:
        assert torch.equal(inp[p], torch.full((64,), float(100 * p + rank), device="cuda"))
    print(f"rank {rank}: got {[inp[p][0].item() for p in peers]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
