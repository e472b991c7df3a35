"""Stream ordering on one rank: which stream last wrote each buffer, and what each stream has waited for.

All streams run synchronously on the CPU, so a missing `wait_stream` never corrupts data here; it is
found instead: a read on stream S of a buffer last written on stream W is a race unless S waited for
W (wait_stream, an event recorded on W after the write) since that write, or the host waited for W
after it (a synchronize, dist.barrier()): work enqueued after a host wait, on any stream, also on one
created later, runs after everything that the waited-for stream held. Tracking starts when a rank first
creates a second stream or waits on the host; buffers written before that count as written on the default
stream just then.
"""
from __future__ import annotations

from collections import defaultdict


class StreamOrder:
    def __init__(self):
        self.pos: dict[int, int] = defaultdict(int)
        self.pos[0] = 1
        self.synced: dict[int, dict[int, int]] = defaultdict(dict)
        self.last_write: dict[int, tuple[int, int, str]] = {}
        self.events: dict[int, tuple[int, int]] = {}
        self.host: dict[int, int] = {}  # per stream: the position up to which the host has waited for it

    def write(self, key: int, stream: int, site: str) -> None:
        self.pos[stream] += 1
        self.last_write[key] = (stream, self.pos[stream], site)

    def race(self, key: int, stream: int) -> tuple[int, int, str] | None:
        """The unsynchronised write this read on `stream` races with, if any."""
        w = self.last_write.get(key, (0, 1, "before the side stream existed"))
        if w[0] == stream or max(self.synced[stream].get(w[0], 0), self.host.get(w[0], 0)) >= w[1]:
            return None
        return w

    def wait_stream(self, waiter: int, other: int) -> None:
        self.synced[waiter][other] = max(self.synced[waiter].get(other, 0), self.pos[other])

    def record_event(self, event: int, stream: int) -> None:
        self.events[event] = (stream, self.pos[stream])

    def wait_event(self, waiter: int, event: int) -> None:
        s, p = self.events.get(event, (0, 0))
        self.synced[waiter][s] = max(self.synced[waiter].get(s, 0), p)

    def host_wait(self, stream: int) -> None:
        """The host waited until `stream`'s work so far completed (stream.synchronize(), dist.barrier())."""
        self.host[stream] = self.pos[stream]

    def synchronize(self) -> None:
        for stream in list(self.pos):
            self.host_wait(stream)
