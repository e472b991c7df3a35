# pkb-corpus
# family: D2
# title: Triton send/recv loop whose flag carries the round number
# patterns: triton, symm_mem.rendezvous, signal_pad_ptrs, tl.atomic_xchg, tl.atomic_add
# world_sizes: 2, 4
# expect: ok
# twin: dev_D2_triton_flag_reuse_no_reset_bug.py
# source: vllm-project/vllm#25892
import os
import time

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl


@triton.jit
def send_block(x, dst_buf, flag, ack, it, N: tl.constexpr):
    ack_ptr = ack.to(tl.pointer_type(tl.int32))
    while tl.atomic_add(ack_ptr, 0, sem="acquire", scope="sys") < it:  # the consumer took the last block
        pass
    offs = tl.arange(0, N)
    tl.store(dst_buf.to(tl.pointer_type(tl.float32)) + offs, tl.load(x + offs))
    tl.atomic_xchg(flag.to(tl.pointer_type(tl.int32)), it + 1, sem="release", scope="sys")


@triton.jit
def recv_block(buf, out, flag, ack, it, N: tl.constexpr):
    flag_ptr = flag.to(tl.pointer_type(tl.int32))
    while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="sys") < it + 1:
        pass
    offs = tl.arange(0, N)
    tl.store(out + offs, tl.load(buf + offs))
    tl.atomic_xchg(ack.to(tl.pointer_type(tl.int32)), it + 1, sem="release", scope="sys")


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    n = 64
    buf = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    peer = rank ^ 1  # even ranks send, odd ranks receive
    received = []
    for it in range(2):
        if rank % 2 == 0:
            x = torch.full((n,), float(it + 1), device="cuda")
            time.sleep(0.2 * it)  # preparing the next block takes a while
            send_block[(1,)](x, hdl.buffer_ptrs[peer], hdl.signal_pad_ptrs[peer] + 4 * rank,
                             hdl.signal_pad_ptrs[rank] + 4 * (world + peer), it, n)
        else:
            out = torch.empty(n, device="cuda")
            recv_block[(1,)](buf, out, hdl.signal_pad_ptrs[rank] + 4 * peer,
                             hdl.signal_pad_ptrs[peer] + 4 * (world + rank), it, n)
            received.append(out)
    dist.barrier()
    for it, out in enumerate(received):
        assert torch.equal(out.cpu(), torch.full((n,), float(it + 1))), f"rank {rank}: stale block {it}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()