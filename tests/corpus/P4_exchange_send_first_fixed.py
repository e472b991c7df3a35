# pkb-corpus
# family: P4
# title: two ranks exchange 16 MiB with the send and recv fused in one batch_isend_irecv
# patterns: batch_isend_irecv, isend, irecv
# world_sizes: 2, 4
# expect: ok
# twin: P4_exchange_send_first_bug.py
# source: NVIDIA/nccl#479
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
    # FIX: one group for the send and the receive, so they progress together
    ops = [dist.P2POp(dist.isend, out, peer), dist.P2POp(dist.irecv, inp, peer)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()

    assert torch.equal(inp[:16], torch.full((16,), float(peer), device="cuda"))
    assert torch.equal(inp[-16:], torch.full((16,), float(peer), device="cuda"))
    print(f"rank {rank}: got {inp[0].item()} from {peer}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
