# pkb-corpus
# family: P1
# title: 16 MiB send with a matching receive
# patterns: send, recv, barrier
# world_sizes: 2, 4
# expect: ok
# twin: P1_unmatched_send_large_bug.py
# source: NVIDIA/nccl#1025
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
    if rank == 0:
        dist.send(weights, dst=1)
    elif rank == 1:
        dist.recv(weights, src=0)  # FIX: the receiver always posts the matching receive
    dist.barrier()

    expected = 0.0 if rank < 2 else float(rank)
    assert torch.equal(weights[:16], torch.full((16,), expected, device="cuda"))
    assert torch.equal(weights[-16:], torch.full((16,), expected, device="cuda"))
    print(f"rank {rank}: weights[0] = {weights[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
