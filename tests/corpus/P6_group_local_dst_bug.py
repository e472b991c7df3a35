# pkb-corpus
# family: P6
# title: pipeline groups of two ranks; send/recv use the group-local rank as the global peer
# patterns: new_group, send, recv
# world_sizes: 4, 8
# expect: deadlock
# twin: P6_group_local_dst_fixed.py
# source: pytorch/pytorch#140460
# bug_line: 31
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    pp = 2
    pp_groups = [dist.new_group(list(range(i, i + pp))) for i in range(0, world, pp)]
    pp_group = pp_groups[rank // pp]
    pp_rank = dist.get_group_rank(pp_group, rank)

    act = torch.full((256,), float(rank), device="cuda")
    if pp_rank == 0:
        # BUG: dst/src of dist.send/recv are global ranks; pp_rank + 1 is only right in the first group
        dist.send(act, dst=pp_rank + 1)
    else:
        buf = torch.empty(256, device="cuda")
        dist.recv(buf, src=pp_rank - 1)
        print(f"rank {rank}: got {buf[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
