# pkb-corpus
# family: D1
# title: Triton put-with-signal pipeline whose consumer waits for exactly one signal per chunk
# patterns: triton, symm_mem.rendezvous, buffer_ptrs, signal_pad_ptrs, tl.atomic_add
# world_sizes: 2, 4
# expect: ok
# twin: dev_D1_triton_put_signal_count_bug.py
# source: microsoft/mscclpp#806
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def push_chunks(x, dst_buf, flag, CHUNK: tl.constexpr, CHUNKS: tl.constexpr):
    offs = tl.arange(0, CHUNK)
    for c in tl.static_range(CHUNKS):
        tl.store(dst_buf.to(tl.pointer_type(tl.float32)) + c * CHUNK + offs, tl.load(x + c * CHUNK + offs))
        tl.atomic_add(flag.to(tl.pointer_type(tl.int32)), 1, sem="release", scope="sys")


@triton.jit
def wait_chunks(flag, EXPECTED: tl.constexpr):
    ptr = flag.to(tl.pointer_type(tl.int32))
    while tl.atomic_add(ptr, 0, sem="acquire", scope="sys") < EXPECTED:
        pass
    tl.atomic_xchg(ptr, 0, sem="relaxed", scope="sys")


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    chunk, chunks = 16, 4
    buf = symm_mem.empty(chunk * chunks, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    peer = rank ^ 1  # even ranks produce, odd ranks consume
    if rank % 2 == 0:
        x = torch.arange(chunk * chunks, dtype=torch.float32, device="cuda") + rank
        flag = hdl.signal_pad_ptrs[peer] + 4 * rank
        push_chunks[(1,)](x, hdl.buffer_ptrs[peer], flag, chunk, chunks)
    else:
        flag = hdl.signal_pad_ptrs[rank] + 4 * peer
        wait_chunks[(1,)](flag, chunks)
        expect = torch.arange(chunk * chunks, dtype=torch.float32) + peer
        assert torch.equal(buf.cpu(), expect), f"rank {rank}: wrong data"
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()