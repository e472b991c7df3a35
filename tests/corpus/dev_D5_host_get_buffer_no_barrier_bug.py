# pkb-corpus
# family: D5
# title: symmetric-memory halo read through get_buffer without a barrier after the owner's write
# patterns: symm_mem.rendezvous, symm_mem.get_buffer, symm_mem.barrier
# world_sizes: 2, 4
# expect: protocol
# twin: dev_D5_host_get_buffer_no_barrier_fixed.py
# source: https://docs.nvidia.com/nvshmem/release-notes-install-guide/best-practice-guide/cuda-nvshmem-interop.html
# bug_line: 26
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    n = 256
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    buf.fill_(float(rank))
    # BUG: no barrier: the neighbour's buffer is read before the neighbour has filled it
    left = hdl.get_buffer((rank - 1) % world, (n,), torch.float32).clone()
    hdl.barrier(channel=0)
    assert torch.equal(left.cpu(), torch.full((n,), float((rank - 1) % world))), f"rank {rank}: stale data"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()