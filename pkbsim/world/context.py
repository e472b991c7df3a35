"""The rank a thread plays: every patched surface asks `current()` which simulated rank it runs for."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pkbsim.world.comms import Batch, Engine
    from pkbsim.world.trace import RankTrace
    from pkbsim.world.world import World

_tls = threading.local()


@dataclass
class RankContext:
    world: "World"
    engine: "Engine"
    rank: int
    trace: "RankTrace"
    device_index: int = 0
    stream: Any = None  # the rank's current simulated CUDA stream
    batch: "Batch | None" = None  # set while a group of point-to-point operations is being issued
    extra: dict = field(default_factory=dict)

    @property
    def stream_id(self) -> int:
        """The id of the rank's current simulated stream (0: the default stream)."""
        return getattr(self.stream, "sim_id", 0) if self.stream is not None else 0


def current() -> RankContext | None:
    return getattr(_tls, "ctx", None)


def require() -> RankContext:
    ctx = current()
    if ctx is None:
        raise RuntimeError("this thread is not a rank of a simulated world")
    return ctx


def bind(ctx: RankContext | None) -> None:
    _tls.ctx = ctx
