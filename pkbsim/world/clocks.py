"""Vector clocks: happens-before for host-level synchronisation and for the blocks of device kernels.

Collectives join the clocks of their members; a receive or a signal-pad wait acquires the clock the
sender or signaller released. Two events are concurrent when neither clock is <= the other.

Clock threads: each rank is one; while a kernel runs, each of its blocks (or Triton programs) is another,
forked from the rank at the block's start and joined back into it when the launch ends (stream order).
Two blocks of one launch are not ordered by the launch itself, only by what they synchronise on, so a
peer's barrier that one block passed orders nothing for its sibling. Blocks share BLOCK_SLOTS threads per
rank (block i runs on slot i mod BLOCK_SLOTS, in program order with the blocks before it on that slot):
that can hide a race between two blocks of one slot, never invent one. Worlds above BLOCK_WORLD_LIMIT
ranks keep one thread per rank, so that clocks stay small.
"""
from __future__ import annotations

from contextlib import contextmanager

BLOCK_SLOTS = 4
BLOCK_WORLD_LIMIT = 64


class VectorClocks:
    def __init__(self, n: int):
        self.ranks = n
        self.slots = BLOCK_SLOTS if n <= BLOCK_WORLD_LIMIT else 0
        size = n * (1 + self.slots)
        self.vc = [[0] * size for _ in range(size)]
        self.current = list(range(n))  # rank -> the clock thread its accesses run on now

    def rank_of(self, thread: int) -> int:
        return thread if thread < self.ranks else (thread - self.ranks) // self.slots

    def thread(self, rank: int) -> int:
        return self.current[rank]

    def of(self, rank: int) -> list[int]:
        """The clock of what rank r runs now (its host code, or the kernel block being interpreted)."""
        return self.vc[self.current[rank]]

    def tick(self, rank: int) -> None:
        t = self.current[rank]
        self.vc[t][t] += 1

    def snapshot(self, rank: int) -> tuple[int, ...]:
        """Advance rank's own clock (a new event) and return the clock of that event."""
        self.tick(rank)
        return tuple(self.of(rank))

    def release(self, rank: int) -> tuple[int, ...]:
        """The clock a release publishes; later accesses of the rank get a newer epoch than it carries."""
        published = tuple(self.of(rank))
        self.tick(rank)
        return published

    def acquire(self, rank: int, released: tuple[int, ...]) -> None:
        mine = self.of(rank)
        mine[:] = [max(a, b) for a, b in zip(mine, released)]
        self.tick(rank)

    def join(self, ranks: list[int]) -> None:
        merged = [max(self.vc[r][i] for r in ranks) for i in range(len(self.vc))]
        for r in ranks:
            self.vc[r] = list(merged)
            self.vc[r][r] += 1

    def ranks_ahead(self, rank: int, clock: tuple[int, ...]) -> set[int]:
        """Other ranks with an event in `clock` that rank's current clock has not seen."""
        mine = self.of(rank)
        return {self.rank_of(t) for t, v in enumerate(clock) if v > mine[t] and self.rank_of(t) != rank}

    def kernel(self, rank: int) -> KernelClocks:
        return KernelClocks(self, rank)


class KernelClocks:
    """The block threads of one launch on one rank (callers hold the world lock around start/finish)."""

    def __init__(self, clocks: VectorClocks, rank: int):
        self.clocks, self.rank = clocks, rank
        self.used: set[int] = set()

    def start(self, index: int) -> int:
        """Fork block `index` from the rank: it sees what the rank did before the launch. Returns its thread."""
        c = self.clocks
        if not c.slots:
            return self.rank
        t = c.ranks + self.rank * c.slots + index % c.slots
        mine, parent = c.vc[t], c.vc[self.rank]
        c.vc[t] = [max(a, b) for a, b in zip(mine, parent)]
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
        """The launch ended: the rank's later work is ordered after every block's."""
        c = self.clocks
        c.current[self.rank] = self.rank
        if not self.used:
            return
        mine = c.vc[self.rank]
        for t in self.used:
            mine[:] = [max(a, b) for a, b in zip(mine, c.vc[t])]
        mine[self.rank] += 1


def happens_before(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b))
