# pkb-corpus
# family: D6
# title: Triton one-shot all-reduce called twice on one buffer without an exit barrier
# patterns: triton, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev, tl.atomic_cas
# world_sizes: 2, 4
# expect: protocol
# twin: dev_D6_triton_one_shot_no_exit_barrier_fixed.py
# source: ROCm/aiter#4082
# bug_line: 49
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

@triton.jit
def signal_peers(pads, rank, channel, WORLD: tl.constexpr):
    # PyTorch's protocol: slot channel*world+src of each peer's pad, CAS 0->1 with release ordering
    for peer in tl.static_range(WORLD):
        pad = tl.load(pads.to(tl.pointer_type(tl.int64)) + peer).to(tl.pointer_type(tl.int32))
        while tl.atomic_cas(pad + channel * WORLD + rank, 0, 1, sem="release", scope="sys") != 0:
            pass


@triton.jit
def wait_peers(pads, rank, channel, WORLD: tl.constexpr):
    # consume each peer's signal on the own pad, CAS 1->0 with acquire ordering
    mine = tl.load(pads.to(tl.pointer_type(tl.int64)) + rank).to(tl.pointer_type(tl.int32))
    for peer in tl.static_range(WORLD):
        while tl.atomic_cas(mine + channel * WORLD + peer, 1, 0, sem="acquire", scope="sys") != 1:
            pass


@triton.jit
def one_shot_all_reduce(bufs, pads, out, rank, N: tl.constexpr, BLOCK: tl.constexpr, WORLD: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    signal_peers(pads, rank, pid, WORLD)
    wait_peers(pads, rank, pid, WORLD)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for peer in tl.static_range(WORLD):
        src = tl.load(bufs.to(tl.pointer_type(tl.int64)) + peer).to(tl.pointer_type(tl.float32))
        acc += tl.load(src + offs, mask=mask)
    tl.store(out + offs, acc, mask=mask)
    # BUG: no exit barrier: the next call overwrites this rank's buffer while peers may still read it


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    n, block = 128, 64
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    for it in range(2):
        buf.copy_(torch.arange(n, dtype=torch.float32, device="cuda") * (rank + 1) + it)
        out = torch.empty(n, dtype=torch.float32, device="cuda")
        one_shot_all_reduce[(n // block,)](hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, rank, n, block, world)
        expect = torch.arange(n, dtype=torch.float32) * (world * (world + 1) // 2) + world * it
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong sum"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()