"""Vector clocks: happens-before for host-level synchronisation, streams and the blocks of device kernels.

Collectives join the clocks of their members; a receive or a signal-pad wait acquires the clock the
sender or signaller released. Two events are concurrent when neither clock is <= the other.

Clock threads follow CUDA's execution model. Each rank's streams run on stream threads (STREAM_SLOTS per
rank, the default stream on slot 0; further streams share the others, a stream keeping the slot it got
first): work enqueued on a stream is ordered after the stream's earlier work, after what the stream waited
for (wait_stream, an event) and after what the host knew when it enqueued it. The host has no thread of
its own, only what it learned by waiting for device work (a synchronize, a host read of device data);
what it learns is pushed into every stream thread of its rank at once, which is the same as joining it at
each later enqueue, since the simulator runs a stream's work when it is enqueued. So a barrier kernel on
the default stream orders nothing for a side stream that never waited for it, as on a GPU.

While a kernel runs, each of its blocks (or Triton programs) is another thread, forked from the stream's
thread at the block's start and joined back into it when the launch ends (stream order). Two blocks of one
launch are not ordered by the launch itself, only by what they synchronise on. Blocks share BLOCK_SLOTS
threads per rank (block i on slot i mod BLOCK_SLOTS, in program order with the blocks before it on that
slot that ran on the same stream), and streams share stream slots: that can hide a race, never invent one. Worlds above
BLOCK_WORLD_LIMIT ranks keep one thread per rank (host, streams and blocks together), so clocks stay small.
"""
from __future__ import annotations

from contextlib import contextmanager

STREAM_SLOTS = 4
BLOCK_SLOTS = 4
BLOCK_WORLD_LIMIT = 64

Clock = tuple[int, ...]


def _max(a: list[int], b) -> list[int]:
    """Element-wise maximum of two clocks (the hot path of every clock update)."""
    return [x if x >= y else y for x, y in zip(a, b)]  # noqa: FURB136 - twice as fast as max() per element


class VectorClocks:
    def __init__(self, n: int):
        small = n <= BLOCK_WORLD_LIMIT
        self.ranks = n
        self.streams = STREAM_SLOTS if small else 1
        self.slots = BLOCK_SLOTS if small else 0
        # threads: stream slot k of rank r is k*n + r (slot 0, the default stream, is thread r); then blocks
        self.owner = [t % n for t in range(n * self.streams)] + [r for r in range(n) for _ in range(self.slots)]
        size = len(self.owner)
        self.vc = [[0] * size for _ in range(size)]
        for t in range(size):  # epochs start at 1: "never synchronised" must not look ordered
            self.vc[t][t] = 1
        self.current = list(range(n))  # rank -> the clock thread its accesses run on now
        self.stream_threads: list[dict[int, int]] = [{0: r} for r in range(n)]  # rank -> stream id -> thread
        self.host: list[list[int]] = [[0] * size for _ in range(n)]  # what each rank's host has waited for
        self.block_stream: dict[int, int] = {}  # block thread -> the stream thread it last forked from

    def rank_of(self, thread: int) -> int:
        return self.owner[thread]

    def thread(self, rank: int) -> int:
        return self.current[rank]

    def of(self, rank: int) -> list[int]:
        """The clock of what rank r runs now (its current stream, or the kernel block being interpreted)."""
        return self.vc[self.current[rank]]

    def tick(self, rank: int) -> None:
        t = self.current[rank]
        self.vc[t][t] += 1

    def snapshot(self, rank: int) -> Clock:
        """Advance rank's own clock (a new event) and return the clock of that event."""
        self.tick(rank)
        return tuple(self.of(rank))

    def release(self, rank: int) -> Clock:
        """The clock a release publishes; later accesses of the rank get a newer epoch than it carries."""
        published = tuple(self.of(rank))
        self.tick(rank)
        return published

    def acquire(self, rank: int, released: Clock) -> None:
        self.acquire_on(self.current[rank], released)

    def acquire_on(self, thread: int, released: Clock) -> None:
        self.vc[thread] = _max(self.vc[thread], released)
        self.vc[thread][thread] += 1

    def join(self, threads: list[int]) -> None:
        """A collective: every member thread is ordered after what all of them did before it."""
        merged = self.vc[threads[0]]
        for t in threads[1:]:
            merged = _max(merged, self.vc[t])
        for t in threads:
            self.vc[t] = list(merged)
            self.vc[t][t] += 1

    def ranks_ahead(self, rank: int, clock: Clock) -> set[int]:
        """Other ranks with an event in `clock` that rank's current clock has not seen."""
        mine = self.of(rank)
        return {self.owner[t] for t, v in enumerate(clock) if v > mine[t] and self.owner[t] != rank}

    # ---- streams and the host ------------------------------------------------------------------------
    def stream_thread(self, rank: int, stream: int) -> int:
        """The thread of `stream` (a simulated stream id) on rank: a new stream takes the next side slot."""
        threads = self.stream_threads[rank]
        t = threads.get(stream)
        if t is None:
            side = self.streams - 1
            t = threads[stream] = rank + self.ranks * (1 + (len(threads) - 1) % side) if side else rank
        return t

    def use_stream(self, rank: int, stream: int) -> None:
        """The rank's program switched its current stream: its device work runs on that stream's thread."""
        self.current[rank] = self.stream_thread(rank, stream)

    def stream_clock(self, rank: int, stream: int) -> Clock:
        """What `stream` has done so far (an event recorded on it, or a stream another waits for)."""
        return tuple(self.vc[self.stream_thread(rank, stream)])

    def stream_waits(self, rank: int, stream: int, clock: Clock) -> None:
        """`stream`'s later work is ordered after `clock` (wait_stream, wait_event)."""
        t = self.stream_thread(rank, stream)
        self.vc[t] = _max(self.vc[t], clock)

    def host_learns(self, rank: int, clock: Clock) -> None:
        """The host waited until device work with `clock` completed: work it enqueues later, on any stream,
        is ordered after it."""
        if self.streams == 1:
            return  # one thread per rank: its stream already holds everything
        host = self.host[rank] = _max(self.host[rank], clock)
        for t in range(rank, self.ranks * self.streams, self.ranks):
            self.vc[t] = _max(self.vc[t], host)

    def host_waits_for_streams(self, rank: int, streams: list[int] | None = None) -> None:
        """The host waited for `streams` (None: every stream of the rank)."""
        threads = (range(rank, self.ranks * self.streams, self.ranks) if streams is None
                   else [self.stream_thread(rank, s) for s in streams])
        for t in threads:
            self.host_learns(rank, self.vc[t])

    def in_kernel(self, rank: int) -> bool:
        """Whether rank runs a kernel block now (its accesses are the device's, not a host read's)."""
        return self.slots > 0 and self.current[rank] >= self.ranks * self.streams

    def kernel(self, rank: int) -> KernelClocks:
        return KernelClocks(self, rank)


class KernelClocks:
    """The block threads of one launch on one rank (callers hold the world lock around start/finish)."""

    def __init__(self, clocks: VectorClocks, rank: int):
        self.clocks, self.rank = clocks, rank
        self.stream = clocks.current[rank]  # the launching stream's thread
        self.used: set[int] = set()

    def start(self, index: int) -> int:
        """Fork block `index` from its stream: it sees what the stream did before the launch. Returns its thread.
        A slot that last served another stream starts from this stream's clock alone (its epoch goes on):
        what that stream's blocks acquired must not order this one."""
        c = self.clocks
        if not c.slots:
            return self.stream
        t = c.ranks * c.streams + self.rank * c.slots + index % c.slots
        if c.block_stream.get(t, self.stream) == self.stream:
            c.vc[t] = _max(c.vc[t], c.vc[self.stream])
        else:
            own, c.vc[t] = c.vc[t][t], list(c.vc[self.stream])
            c.vc[t][t] = own
        c.block_stream[t] = self.stream
        c.vc[t][t] += 1
        self.used.add(t)
        return t

    def run_on(self, thread: int) -> int:
        """Make `thread` the rank's current clock thread; returns the previous one (to restore)."""
        prev, self.clocks.current[self.rank] = self.clocks.current[self.rank], thread
        return prev

    @contextmanager
    def running(self, thread: int):
        """The rank's accesses run on `thread` inside the block (a block's slice, a Triton program)."""
        prev = self.run_on(thread)
        try:
            yield
        finally:
            self.run_on(prev)

    def finish(self) -> None:
        """The launch ended: the stream's later work is ordered after every block's."""
        c = self.clocks
        c.current[self.rank] = self.stream
        if not self.used:
            return
        mine = c.vc[self.stream]
        for t in self.used:
            mine = _max(mine, c.vc[t])
        mine[self.stream] += 1
        c.vc[self.stream] = mine


def happens_before(a: Clock, b: Clock) -> bool:
    return all(x <= y for x, y in zip(a, b))
