# pkb-corpus
# family: D1
# title: symmetric-memory barrier called with the same channel on every rank
# patterns: symm_mem.barrier, symm_mem.get_buffer
# world_sizes: 2, 4
# expect: ok
# twin: dev_D1_host_barrier_channel_mismatch_bug.py
# source: microsoft/mscclpp#806
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    n = 128
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    buf.fill_(float(rank))
    hdl.barrier(channel=0)
    total = sum(hdl.get_buffer(p, (n,), torch.float32) for p in range(world))
    assert torch.equal(total.cpu(), torch.full((n,), float(sum(range(world))))), f"rank {rank}: wrong sum"
    hdl.barrier(channel=0)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()