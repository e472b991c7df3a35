# pkb-corpus
# family: P3
# title: bf16 activation sent, received into a float32 buffer
# patterns: send, recv
# world_sizes: 2, 4
# expect: mismatch
# twin: P3_recv_dtype_fixed.py
# source: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api/p2p.html
# bug_line: 30
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
        # BUG: the receive buffer is allocated in the default dtype (float32): same count,
        # different datatype, so half of the bytes the receiver expects never arrive
        buf = torch.empty(hidden, device="cuda")
        dist.recv(buf, src=rank - 1)
        print(f"rank {rank}: act[8] = {buf[8].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
