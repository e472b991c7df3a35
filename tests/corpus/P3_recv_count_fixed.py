# pkb-corpus
# family: P3
# title: receiver allocates one micro-batch, as sent
# patterns: send, recv
# world_sizes: 2, 4
# expect: ok
# twin: P3_recv_count_bug.py
# source: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api/p2p.html
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
        buf = torch.empty(MICRO_BATCH, HIDDEN, device="cuda")  # FIX: the micro-batch shape
        dist.recv(buf, src=rank - 1)
        expected = torch.arange(MICRO_BATCH * HIDDEN, dtype=torch.float32, device="cuda").view(MICRO_BATCH, HIDDEN)
        assert torch.equal(buf, expected)
        print(f"rank {rank}: received {tuple(buf.shape)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
