# pkb-corpus
# family: D2
# title: one symmetric allocation rendezvoused by WORLD and by a pair group, both signalling channel 0
# patterns: new_group, symm_mem.rendezvous, symm_mem.put_signal, symm_mem.wait_signal, symm_mem.barrier
# world_sizes: 2, 4
# expect: protocol
# twin: D2_two_groups_same_allocation_fixed.py
# source: pytorch/pytorch#192581
# bug_line: 30
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()
    world = dist.get_world_size()

    n = 1024
    pair = [dist.new_group([i, i + 1]) for i in range(0, world, 2)][rank // 2]
    buf = symm_mem.empty(2 * n, dtype=torch.float32, device="cuda")  # [ring part | pair part]
    world_hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    # BUG: the same allocation, hence the same signal pad, is rendezvoused by a second group;
    # slots are indexed by group-local rank, so pair signals land in WORLD slots and vice versa
    pair_hdl = symm_mem.rendezvous(buf, pair)
    right, left = (rank + 1) % world, (rank - 1) % world
    partner = 1 - pair_hdl.rank  # group-local rank of my pair partner

    world_hdl.get_buffer(right, (n,), torch.float32).fill_(float(rank))
    world_hdl.put_signal(dst_rank=right, channel=0)
    pair_hdl.get_buffer(partner, (n,), torch.float32, storage_offset=n).fill_(float(100 + rank))
    pair_hdl.put_signal(dst_rank=partner, channel=0)

    pair_hdl.wait_signal(src_rank=partner, channel=0)  # may consume the ring signal instead
    pair_got = buf[n:].clone()
    world_hdl.wait_signal(src_rank=left, channel=0)
    ring_got = buf[:n].clone()
    world_hdl.barrier(channel=1)

    print(f"rank {rank}: ring {ring_got[0].item()} pair {pair_got[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
