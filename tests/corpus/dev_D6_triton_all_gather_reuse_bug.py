# pkb-corpus
# family: D6
# title: Triton all-gather by peer stores, called in a loop without an entry barrier (overwrites a buffer the peer still copies out)
# patterns: triton, symm_mem.rendezvous, buffer_ptrs_dev, peer stores
# world_sizes: 2, 4
# expect: protocol
# twin: dev_D6_triton_all_gather_reuse_fixed.py
# source: ROCm/aiter#4082
# bug_line: 42
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
def all_gather_by_stores(x, bufs, pads, rank, SHARD: tl.constexpr, WORLD: tl.constexpr):
    ptrs = bufs.to(tl.pointer_type(tl.int64))
    offs = tl.arange(0, SHARD)
    shard = tl.load(x + offs)
    # BUG: no entry barrier: stores into a peer's buffer while the peer may still copy out the last round
    for peer in tl.static_range(WORLD):
        dst = tl.load(ptrs + peer).to(tl.pointer_type(tl.float32))
        tl.store(dst + rank * SHARD + offs, shard)
    signal_peers(pads, rank, 1, WORLD)
    wait_peers(pads, rank, 1, WORLD)


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = 32
    buf = symm_mem.empty(shard * world, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    for it in range(2):
        x = torch.full((shard,), float(10 * it + rank), device="cuda")
        all_gather_by_stores[(1,)](x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, rank, shard, world)
        out = buf.clone()
        expect = (torch.arange(world, dtype=torch.float32) + 10 * it).repeat_interleave(shard)
        assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong gather"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()