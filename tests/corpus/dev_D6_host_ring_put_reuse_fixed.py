# pkb-corpus
# family: D6
# title: symmetric-memory ring shift by peer writes with a barrier between rounds
# patterns: symm_mem.get_buffer, symm_mem.put_signal, symm_mem.wait_signal, symm_mem.barrier
# world_sizes: 2, 4
# expect: ok
# twin: dev_D6_host_ring_put_reuse_bug.py
# source: ROCm/aiter#4082
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
    right, left = (rank + 1) % world, (rank - 1) % world
    for it in range(3):
        hdl.get_buffer(right, (n,), torch.float32).fill_(float(100 * it + rank))
        hdl.put_signal(dst_rank=right, channel=0)
        hdl.wait_signal(src_rank=left, channel=0)
        got = buf.clone()
        assert torch.equal(got.cpu(), torch.full((n,), float(100 * it + left))), f"rank {rank}: overwritten"
        hdl.barrier(channel=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()