"""The rank a thread plays: every patched surface asks `current()` which simulated rank it runs for."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from pkbsim.world.comms import Batch, Comm, Engine
    from pkbsim.standins.cuda_shim import SimStream
    from pkbsim.world.ops_mode import RankOpsMode
    from pkbsim.world.process_group import SimWork
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
    env: dict[str, str] | None = None  # the rank's torchrun variables, over the real os.environ (environ.py)
    generator: torch.Generator | None = None  # the rank's CUDA generator (cuda_shim.py)
    record_compute: bool = False  # the compute trace is wanted (ops_mode.py)
    ops_mode: RankOpsMode | None = None  # pushed once, when first needed (ops_mode.ensure_ops_mode)
    default_stream: SimStream | None = None
    device_set: bool = False  # torch.cuda.set_device was called
    explicit_device: int | None = None  # the last "cuda:i" the program wrote out
    nccl: bool = False  # the program asked for the NCCL backend (device rules bind only NCCL programs)
    world_comm: Comm | None = None  # the default group's communicator, created first
    gpu_mesh: bool = False  # the program made a "cuda" DeviceMesh (dtensor_ops.py)
    unwaited: dict[int, SimWork] = field(default_factory=dict)  # async collectives not yet waited for
    plugin_states: dict = field(default_factory=dict)  # plugins.RankState -> that plug-in's state here
    gone: bool = False  # the rank called os._exit: what its thread does while it unwinds is not shown
    call: int = 0  # the harness's call the rank is in (1-based, taskrun.run_calls; 0: not a harness run)

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
