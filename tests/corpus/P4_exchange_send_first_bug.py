# pkb-corpus
# family: P4
# title: two ranks exchange 16 MiB, both calling send before recv
# patterns: send, recv
# world_sizes: 2, 4
# expect: deadlock
# twin: P4_exchange_send_first_fixed.py
# source: NVIDIA/nccl#479
# bug_line: 28
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    n = 4 * 1024 * 1024  # 16 MiB: too large to sit in NCCL's buffer while the peer is not receiving
    peer = rank ^ 1  # pairs (0, 1), (2, 3)
    out = torch.full((n,), float(rank), device="cuda")
    inp = torch.empty(n, device="cuda")
    # BUG: both ranks of a pair send first; each send waits for a recv the peer posts only
    # after its own send has completed
    dist.send(out, dst=peer)
    dist.recv(inp, src=peer)

    print(f"rank {rank}: got {inp[0].item()} from {peer}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
