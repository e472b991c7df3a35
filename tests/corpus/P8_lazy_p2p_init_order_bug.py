# pkb-corpus
# family: P8
# title: hand-rolled all-to-all with unbatched isend/irecv, each rank starting at its right neighbour
# patterns: isend, irecv
# world_sizes: 4, 8
# expect: deadlock
# twin: P8_lazy_p2p_init_order_fixed.py
# source: NVIDIA/Megatron-LM#5240
# options: --lazy-p2p-init
# bug_line: 33
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
    # BUG: the first P2P op towards a peer lazily creates the 2-rank communicator of that pair,
    # collectively and blocking; every rank starts with rank + 1, so rank r waits for r + 1,
    # which waits for r + 2, ... around the ring
    peers = [(rank + i) % world for i in range(1, world)]
    works = []
    for p in peers:
        if rank < p:  # within a pair the lower rank sends first
            works += [dist.isend(out[p], dst=p), dist.irecv(inp[p], src=p)]
        else:
            works += [dist.irecv(inp[p], src=p), dist.isend(out[p], dst=p)]
    for w in works:
        w.wait()

    print(f"rank {rank}: got {[inp[p][0].item() for p in peers]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
