# pkb-corpus
# family: P7
# title: two sends to one peer in a batch (100 then 1000 elements), receives posted in the other order
# patterns: batch_isend_irecv, isend, irecv
# world_sizes: 2, 4
# expect: mismatch
# twin: P7_same_peer_order_in_batch_fixed.py
# source: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/p2p.html
# bug_line: 32
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    peer = rank ^ 1
    if rank % 2 == 0:
        header = torch.full((100,), 1.0, device="cuda")
        payload = torch.full((1000,), 2.0, device="cuda")
        ops = [dist.P2POp(dist.isend, header, peer), dist.P2POp(dist.isend, payload, peer)]
    else:
        header = torch.empty(100, device="cuda")
        payload = torch.empty(1000, device="cuda")
        # BUG: operations to the same peer are matched in order: the 1000-element receive
        # meets the 100-element send
        ops = [dist.P2POp(dist.irecv, payload, peer), dist.P2POp(dist.irecv, header, peer)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()

    print(f"rank {rank}: header {header[0].item()} payload {payload[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
