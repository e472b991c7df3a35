# pkb-corpus
# family: P1
# title: 16 MiB send whose receiver decided it did not need the data
# patterns: send, recv, barrier
# world_sizes: 2, 4
# expect: deadlock
# twin: P1_unmatched_send_large_fixed.py
# source: NVIDIA/nccl#1025
# bug_line: 28
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    n = 4 * 1024 * 1024  # 16 MiB of float32: larger than NCCL's 4 MiB connection buffer
    weights = torch.full((n,), float(rank), device="cuda")
    have_local_copy = rank != 0  # stage 1 finds a cached copy and skips the transfer
    if rank == 0:
        # BUG: sent unconditionally, but rank 1 never posts the receive; a message this large
        # cannot be buffered, so the send never completes
        dist.send(weights, dst=1)
    elif rank == 1 and not have_local_copy:
        dist.recv(weights, src=0)
    dist.barrier()

    print(f"rank {rank}: weights[0] = {weights[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
