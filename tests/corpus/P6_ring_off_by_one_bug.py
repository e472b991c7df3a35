# pkb-corpus
# family: P6
# title: ring exchange that receives from the right neighbour instead of the left
# patterns: batch_isend_irecv, isend, irecv
# world_sizes: 4, 8
# expect: deadlock
# twin: P6_ring_off_by_one_fixed.py
# source: NVIDIA/Megatron-LM#1450
# bug_line: 28
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    right = (rank + 1) % world
    # BUG: off by one: the left neighbour is rank - 1 (with two ranks the mistake is invisible)
    left = (rank + 1) % world
    send_buf = torch.full((512,), float(rank), device="cuda")
    recv_buf = torch.empty(512, device="cuda")
    ops = [dist.P2POp(dist.isend, send_buf, right), dist.P2POp(dist.irecv, recv_buf, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()

    print(f"rank {rank}: got {recv_buf[0].item()} from {left}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
