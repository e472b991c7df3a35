# pkb-corpus
# family: D5
# title: Triton all-to-all by peer writes that signals each peer before writing its chunk
# patterns: triton, symm_mem.rendezvous, peer stores, tl.atomic_xchg
# world_sizes: 2, 4
# expect: protocol
# twin: dev_D5_triton_all_to_all_signal_first_fixed.py
# source: vllm-project/vllm#2760
# bug_line: 28
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def all_to_all_by_writes(x, bufs, pads, rank, CHUNK: tl.constexpr, WORLD: tl.constexpr):
    ptrs = bufs.to(tl.pointer_type(tl.int64))
    pad_ptrs = pads.to(tl.pointer_type(tl.int64))
    offs = tl.arange(0, CHUNK)
    for peer in tl.static_range(WORLD):
        dst = tl.load(ptrs + peer).to(tl.pointer_type(tl.float32))
        flag = tl.load(pad_ptrs + peer).to(tl.pointer_type(tl.int32)) + rank
        # BUG: the peer is signalled before the chunk is written
        tl.atomic_xchg(flag, 1, sem="release", scope="sys")
        tl.store(dst + rank * CHUNK + offs, tl.load(x + peer * CHUNK + offs))
    mine = tl.load(pad_ptrs + rank).to(tl.pointer_type(tl.int32))
    for peer in tl.static_range(WORLD):
        while tl.atomic_cas(mine + peer, 1, 0, sem="acquire", scope="sys") != 1:
            pass


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    chunk = 16
    buf = symm_mem.empty(chunk * world, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    x = (torch.arange(world, dtype=torch.float32, device="cuda") + 100 * rank).repeat_interleave(chunk)
    all_to_all_by_writes[(1,)](x, hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, rank, chunk, world)
    got = buf.clone()
    expect = (torch.arange(world, dtype=torch.float32) * 100 + rank).repeat_interleave(chunk)
    assert torch.equal(got.cpu(), expect), f"rank {rank}: wrong all-to-all"
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()