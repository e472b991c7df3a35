"""The protocol IR: what a rank did to symmetric memory, whoever issued it (host call, op or kernel).

Kinds: `put`/`get` (a write/read of `owner`'s symmetric buffer, bytes [lo, hi); owner may be the rank
itself), `signal` (an update of a flag word: op, value, memory ordering), `wait` (a read that polls a
flag word: cmp, value, ordering), `fence`, `barrier` (channel), `kernel` (a launch or op boundary).
Events are appended per rank; the race detector and the spin detector consume them as they come.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    rank: int
    site: str
    where: str  # the kernel ("allreduce_kernel[program 2]") or host op ("put_signal") that issued it
    owner: int = -1  # rank whose memory is touched
    lo: int = 0  # byte range within the owner's buffer, or the flag's word index in its pad/buffer
    hi: int = 0
    on_pad: bool = False
    op: str = ""  # signal: "set" | "add" | "cas" | "xchg" ...; wait: "==" | "!=" | "poll"
    value: int | None = None
    sem: str = ""  # "release" | "acquire" | "acq_rel" | "relaxed" | "" (not an atomic)
    call: int = 0  # the harness's call the issuing rank was in (RankContext.call)

    def describe(self) -> str:
        mem = "" if self.owner < 0 else (f" rank {self.owner} " + ("signal pad word" if self.on_pad else "buffer bytes")
                                         + (f" {self.lo}" if self.on_pad else f" [{self.lo}, {self.hi})"))
        return f"{self.kind}{mem} by rank {self.rank} in {self.where} at {self.site}" + (f" (call {self.call})" if self.call else "")


class ProtocolLog:
    """Per-rank IR streams of one run (kept for reports, tests and `--trace`)."""

    def __init__(self, world_size: int, limit: int = 100_000):
        self.events: list[list[Event]] = [[] for _ in range(world_size)]
        self.limit = limit

    def append(self, ev: Event) -> None:
        stream = self.events[ev.rank]
        if len(stream) < self.limit:
            stream.append(ev)

    def extend(self, rank: int, make, count: int) -> None:
        """Append events make(0) .. make(count - 1) of `rank`, made only while the stream has room."""
        stream = self.events[rank]
        stream.extend(make(k) for k in range(min(count, self.limit - len(stream))))

    def kinds(self, rank: int) -> list[str]:
        return [e.kind for e in self.events[rank]]
