# pkb-corpus
# family: D1
# title: symmetric-memory ring shift that waits for the signal of the wrong neighbour
# patterns: symm_mem.rendezvous, symm_mem.put_signal, symm_mem.wait_signal, symm_mem.barrier
# world_sizes: 4, 8
# expect: protocol
# twin: D1_wait_wrong_src_fixed.py
# source: pytorch/pytorch#163194
# bug_line: 33
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
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    right, left = (rank + 1) % world, (rank - 1) % world

    hdl.get_buffer(right, (n,), torch.float32).fill_(float(rank))  # write into the right neighbour
    hdl.put_signal(dst_rank=right, channel=0)
    # BUG: the data in my buffer comes from the left neighbour; nobody ever signals the slot
    # of the right neighbour in my pad, so this waits forever
    hdl.wait_signal(src_rank=right, channel=0)
    got = buf.clone()
    hdl.barrier(channel=1)

    print(f"rank {rank}: got {got[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
