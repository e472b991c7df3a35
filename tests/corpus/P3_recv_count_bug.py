# pkb-corpus
# family: P3
# title: receiver allocates for the global batch, sender sends one micro-batch
# patterns: send, recv
# world_sizes: 2, 4
# expect: mismatch
# twin: P3_recv_count_fixed.py
# source: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api/p2p.html
# bug_line: 30
import os

import torch
import torch.distributed as dist

GLOBAL_BATCH, MICRO_BATCH, HIDDEN = 8, 4, 64


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    if rank % 2 == 0:
        act = torch.arange(MICRO_BATCH * HIDDEN, dtype=torch.float32, device="cuda").view(MICRO_BATCH, HIDDEN)
        dist.send(act, dst=rank + 1)
    else:
        # BUG: the shape uses the global batch size: 512 elements expected, 256 sent
        buf = torch.empty(GLOBAL_BATCH, HIDDEN, device="cuda")
        dist.recv(buf, src=rank - 1)
        print(f"rank {rank}: received {tuple(buf.shape)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
