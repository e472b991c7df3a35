"""Large symmetric buffers, a small kernel: every rank allocates MIB MiB of symmetric memory (1024 in the
test, as LLM-written candidates size their workspaces), and a Triton kernel writes 256 floats near the end
of the next rank's buffer before a barrier; each rank checks what its predecessor wrote. pkb's memory
must follow what is touched, not the buffers' size. Usage: symm_large_buffers.py [MIB]."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def push(dst, value, offset, BLOCK: tl.constexpr):
    offs = offset + tl.arange(0, BLOCK)
    tl.store(dst.to(tl.pointer_type(tl.float32)) + offs, tl.full((BLOCK,), value, tl.float32))


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    n = mib * 2**20 // 4
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    offset = n - 4 * BLOCK
    hdl.barrier(channel=0)
    push[(1,)](hdl.buffer_ptrs[(rank + 1) % world], float(rank), offset, BLOCK)
    hdl.barrier(channel=1)
    got = buf[offset:offset + BLOCK]
    assert bool((got == (rank - 1) % world).all()), f"rank {rank}: wrong data"
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
