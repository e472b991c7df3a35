# pkb-corpus
# family: D5
# title: host-side two-shot all-reduce on symmetric memory without a barrier between reduce-scatter and all-gather
# patterns: symm_mem.get_buffer, symm_mem.barrier
# world_sizes: 2, 4
# expect: protocol
# twin: dev_D5_host_two_shot_no_phase_barrier_fixed.py
# source: https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.cuh
# bug_line: 32
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    chunk = 64
    n = chunk * world
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    buf.copy_(torch.arange(n, dtype=torch.float32, device="cuda") * (rank + 1))
    hdl.barrier(channel=0)
    mine = slice(rank * chunk, (rank + 1) * chunk)
    peers = [hdl.get_buffer(p, (n,), torch.float32) for p in range(world)]
    reduced = sum(p[mine] for p in peers)  # reduce-scatter: sum this rank's chunk over all buffers
    buf[mine].copy_(reduced)
    # BUG: no barrier between the phases: peers' reduced chunks are gathered before they are written
    out = torch.cat([peers[p][p * chunk:(p + 1) * chunk] for p in range(world)])
    expect = torch.arange(n, dtype=torch.float32) * (world * (world + 1) // 2)
    hdl.barrier(channel=0)
    assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong sum"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()