"""What a rank's host learns when it waits for its device, for the vector clocks (pkbsim.world.clocks).

On a GPU the host runs ahead of its streams: a barrier kernel or a collective on a stream orders that
stream's later work, not the host's, nor other streams'. The host learns what a stream did only by
waiting for it: a synchronize (device, stream or event), NCCL's `dist.barrier()` (the current stream),
and every host read of device data (`.item()`, `.tolist()`, `.cpu()`, printing, an op whose output shape
depends on data): CUDA copies such data to the host on the current stream and waits for it
(ops_mode.host_read). What the host learned orders everything it enqueues later, on any stream.
(streams.py keeps the separate per-buffer order of one rank's streams for its local tensors.)
"""
from __future__ import annotations

from pkbsim.world.clocks import Clock


def wait_streams(ctx, streams: list[int] | None = None) -> None:
    """The host waited for `streams` (simulated stream ids; None: every stream of the rank)."""
    with ctx.world.lock:
        ctx.world.clocks.host_waits_for_streams(ctx.rank, streams)


def wait_clock(ctx, clock: Clock | None) -> None:
    """The host waited for an event: what its stream had done when it was recorded (None: never recorded)."""
    if clock is not None:
        with ctx.world.lock:
            ctx.world.clocks.host_learns(ctx.rank, clock)

