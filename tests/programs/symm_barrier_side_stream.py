"""A symmetric-memory barrier on the default stream does not order a side stream that never waited for it.

Every rank fills its symmetric buffer and calls `hdl.barrier()` on the default stream: the barrier kernel
acquires the peers' writes only when it runs on the device, and the host does not wait for it. Then a side
stream reads the next rank's buffer (a copy, or a Triton kernel). Mode `bug`: the side stream never waited,
so its read can run before the barrier, before the peer wrote: a race. The fixed twins order it: `wait_stream`
(the side stream waits for the default one), `event` (an event recorded after the barrier), `synchronize`
(the host waits for the device before enqueueing the read), `item` (a host read of device data on the
default stream, which waits for it). Usage: symm_barrier_side_stream.py MODE [copy|triton].
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

N = 64


@triton.jit
def pull(src, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(src.to(tl.pointer_type(tl.float32)) + offs, mask=mask), mask=mask)


def order(mode: str, side: torch.cuda.Stream, buf: torch.Tensor) -> None:
    """What the fixed twins do between the barrier and the side stream's read."""
    if mode == "wait_stream":
        side.wait_stream(torch.cuda.current_stream())
    elif mode == "event":
        done = torch.cuda.Event()
        done.record()
        side.wait_event(done)
    elif mode == "synchronize":
        torch.cuda.synchronize()
    elif mode == "item":
        assert buf[0].item() == dist.get_rank()
    else:
        assert mode == "bug", mode


def main() -> None:
    mode, reader = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "copy"
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    peer = (rank + 1) % world
    buf = symm_mem.empty(N, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    side = torch.cuda.Stream()
    hdl.barrier(channel=0)
    buf.fill_(float(rank))
    hdl.barrier(channel=1)
    order(mode, side, buf)
    with torch.cuda.stream(side):
        if reader == "triton":
            got = torch.empty(N, device="cuda")
            pull[(1,)](hdl.buffer_ptrs[peer], got, N, BLOCK=N)
        else:
            got = hdl.get_buffer(peer, [N], torch.float32).clone()
    torch.cuda.current_stream().wait_stream(side)
    assert bool((got == peer).all()), f"rank {rank}: wrong data from rank {peer}"
    hdl.barrier(channel=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
