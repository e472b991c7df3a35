# pkb-corpus
# family: D5
# title: Triton two-shot all-reduce that gathers the reduced chunks without a barrier after the reduce-scatter
# patterns: triton, symm_mem.rendezvous, buffer_ptrs_dev, signal_pad_ptrs_dev
# world_sizes: 2, 4
# expect: protocol
# twin: dev_D5_triton_two_shot_no_phase_barrier_fixed.py
# source: https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.cuh
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
def two_shot_all_reduce(bufs, pads, out, rank, CHUNK: tl.constexpr, WORLD: tl.constexpr):
    ptrs = bufs.to(tl.pointer_type(tl.int64))
    mine = tl.load(ptrs + rank).to(tl.pointer_type(tl.float32))
    offs = rank * CHUNK + tl.arange(0, CHUNK)
    signal_peers(pads, rank, 0, WORLD)
    wait_peers(pads, rank, 0, WORLD)
    # reduce-scatter: this rank reduces its chunk from every peer's buffer
    acc = tl.zeros((CHUNK,), dtype=tl.float32)
    for peer in tl.static_range(WORLD):
        acc += tl.load(tl.load(ptrs + peer).to(tl.pointer_type(tl.float32)) + offs)
    tl.store(mine + offs, acc)
    # BUG: no barrier between the phases: the peers' reduced chunks are gathered before they are written
    # all-gather: every chunk from the peer that reduced it
    for peer in tl.static_range(WORLD):
        src = tl.load(ptrs + peer).to(tl.pointer_type(tl.float32))
        chunk = peer * CHUNK + tl.arange(0, CHUNK)
        tl.store(out + chunk, tl.load(src + chunk))
    signal_peers(pads, rank, 0, WORLD)
    wait_peers(pads, rank, 0, WORLD)


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    chunk = 32
    n = chunk * world
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    buf.copy_(torch.arange(n, dtype=torch.float32, device="cuda") + rank)
    out = torch.empty(n, dtype=torch.float32, device="cuda")
    two_shot_all_reduce[(1,)](hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, rank, chunk, world)
    expect = torch.arange(n, dtype=torch.float32) * world + world * (world - 1) // 2
    assert torch.equal(out.cpu(), expect), f"rank {rank}: wrong sum"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()