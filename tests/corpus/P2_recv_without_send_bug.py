# pkb-corpus
# family: P2
# title: receiver expects one micro-batch more than the sender sends (off-by-one range)
# patterns: send, recv
# world_sizes: 2, 4
# expect: deadlock
# twin: P2_recv_without_send_fixed.py
# source: NVIDIA/nccl#2130
# bug_line: 30
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
        # BUG: range starts at 1, so only n_micro - 1 activations are sent
        for i in range(1, n_micro):
            dist.send(torch.full((256,), float(i), device="cuda"), dst=rank + 1)
    else:  # stage 1 receives one activation per micro-batch
        for i in range(n_micro):
            buf = torch.empty(256, device="cuda")
            dist.recv(buf, src=rank - 1)
            print(f"rank {rank}: micro-batch {i} -> {buf[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
