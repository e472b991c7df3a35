# pkb-corpus
# family: P3
# title: bf16 activation received into a bf16 buffer
# patterns: send, recv
# world_sizes: 2, 4
# expect: ok
# twin: P3_recv_dtype_bug.py
# source: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api/p2p.html
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    hidden = 1024
    if rank % 2 == 0:  # stage 0 runs under autocast: its output is bf16
        act = torch.arange(hidden, device="cuda").to(torch.bfloat16) / 8
        dist.send(act, dst=rank + 1)
    else:
        buf = torch.empty(hidden, dtype=torch.bfloat16, device="cuda")  # FIX: the sender's dtype
        dist.recv(buf, src=rank - 1)
        assert torch.equal(buf, torch.arange(hidden, device="cuda").to(torch.bfloat16) / 8)
        print(f"rank {rank}: act[8] = {buf[8].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
