# pkb-corpus
# family: P2
# title: sender and receiver loop over the same micro-batches
# patterns: send, recv
# world_sizes: 2, 4
# expect: ok
# twin: P2_recv_without_send_bug.py
# source: NVIDIA/nccl#2130
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    n_micro = 3
    if rank % 2 == 0:  # pipeline stage 0 of the pair (rank, rank + 1)
        for i in range(n_micro):  # FIX: one send per micro-batch
            dist.send(torch.full((256,), float(i), device="cuda"), dst=rank + 1)
    else:  # stage 1 receives one activation per micro-batch
        for i in range(n_micro):
            buf = torch.empty(256, device="cuda")
            dist.recv(buf, src=rank - 1)
            assert torch.equal(buf, torch.full((256,), float(i), device="cuda"))
            print(f"rank {rank}: micro-batch {i} -> {buf[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
