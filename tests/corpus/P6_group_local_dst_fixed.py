# pkb-corpus
# family: P6
# title: pipeline groups of two ranks; group-local peers translated to global ranks
# patterns: new_group, send, recv
# world_sizes: 4, 8
# expect: ok
# twin: P6_group_local_dst_bug.py
# source: pytorch/pytorch#140460
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
        # FIX: translate the group-local peer to the global rank dist.send expects
        dist.send(act, dst=dist.get_global_rank(pp_group, pp_rank + 1))
    else:
        buf = torch.empty(256, device="cuda")
        dist.recv(buf, src=dist.get_global_rank(pp_group, pp_rank - 1))
        assert torch.equal(buf, torch.full((256,), float(rank - 1), device="cuda"))
        print(f"rank {rank}: got {buf[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
