"""CUDA on the CPU: "cuda" devices, torch.cuda streams/events/devices, mapped onto each rank's thread.

`DeviceMapMode` (a per-thread TorchFunctionMode) rewrites device="cuda[:i]" (and integer devices) to the
CPU in factories, `.to()` and `.cuda()`, and gives random factories the rank's own generator, so ranks
do not share the process-wide RNG. `install_torch_cuda` replaces the torch.cuda functions programs call
with versions that answer for the calling rank. Streams are recorded (ids, wait edges) for the timing
engine; every stream runs synchronously on the CPU.
"""
from __future__ import annotations

import contextlib
import itertools
import time
import types

import torch
from torch.overrides import TorchFunctionMode

from pkbsim.world.context import current
from pkbsim.world.patching import Patches
from pkbsim.world.sites import user_site

_RANDOM = {torch.randn, torch.rand, torch.randint, torch.randperm, torch.normal, torch.multinomial,
           torch.bernoulli, torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.random_,
           torch.Tensor.bernoulli_, torch.Tensor.exponential_}
_SELF = {torch.Tensor.cuda, torch.Tensor.pin_memory}
_SPECIAL = _RANDOM | _SELF | {torch.Tensor.to}


def _is_cuda(dev) -> bool:
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    if isinstance(dev, str):
        return dev.startswith("cuda")
    return isinstance(dev, int) and not isinstance(dev, bool)


class DeviceMapMode(TorchFunctionMode):
    def __init__(self, generator: torch.Generator):
        super().__init__()
        self.generator = generator

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if not kwargs and func not in _SPECIAL:
            return func(*args)
        kwargs = dict(kwargs or {})
        if func in _SELF:
            return args[0]
        dev = kwargs.get("device")
        if dev is not None and _is_cuda(dev):
            _note_explicit_device(dev)
            kwargs["device"] = "cpu"
        if func is torch.Tensor.to and len(args) > 1 and _is_cuda(args[1]):
            _note_explicit_device(args[1])
            args = (args[0], "cpu", *args[2:])
        if func in _RANDOM and kwargs.get("generator") is None:
            kwargs["generator"] = self.generator
        return func(*args, **kwargs)


def _note_explicit_device(dev) -> None:
    """Remember "cuda:i" written out by the program: NCCL uses the tensors' device, not the current one."""
    index = dev if isinstance(dev, int) else torch.device(dev).index
    ctx = current()
    if index is not None and ctx is not None:
        ctx.extra["explicit_device"] = index


def bound_device(ctx) -> int:
    """The GPU a rank's NCCL communicators would be created on."""
    if ctx.extra.get("device_set"):
        return ctx.device_index
    return ctx.extra.get("explicit_device", ctx.device_index)


class SimStream:
    """A CUDA stream stand-in: work runs synchronously; ids and wait edges go into the trace."""

    _ids = itertools.count(1)

    def __init__(self, device=None, priority: int = 0, stream_id: int | None = None, **_):
        self.sim_id = next(self._ids) if stream_id is None else stream_id
        self.priority = priority
        ctx = current()
        self.device = torch.device("cuda", ctx.device_index if ctx else 0)
        if ctx is not None and self.sim_id != 0:
            from pkbsim.world.ops_mode import ensure_ops_mode
            ensure_ops_mode(ctx).track_streams()

    @property
    def cuda_stream(self) -> int:
        return self.sim_id

    def wait_stream(self, other: "SimStream") -> None:
        _record("stream", "wait_stream", stream=self.sim_id, other=other.sim_id)
        so = _stream_order()
        if so is not None:
            so.wait_stream(self.sim_id, other.sim_id)

    def wait_event(self, event: "SimEvent") -> None:
        _record("stream", "wait_event", stream=self.sim_id, event=event.sim_id)
        so = _stream_order()
        if so is not None:
            so.wait_event(self.sim_id, event.sim_id)

    def record_event(self, event: "SimEvent | None" = None) -> "SimEvent":
        event = event or SimEvent()
        event.record(self)
        return event

    def synchronize(self) -> None:
        synchronize()

    def query(self) -> bool:
        return True

    def __enter__(self):
        self._cm = stream(self)
        return self._cm.__enter__()

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)

    def __repr__(self) -> str:
        return f"<SimStream {self.sim_id} on {self.device}>"


class SimEvent:
    _ids = itertools.count(1)

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, **_):
        self.sim_id = next(self._ids)
        self.t: float | None = None

    def record(self, stream: SimStream | None = None) -> None:
        self.t = time.perf_counter()
        s = stream or current_stream()
        _record("stream", "event_record", stream=s.sim_id, event=self.sim_id)
        so = _stream_order()
        if so is not None:
            so.record_event(self.sim_id, s.sim_id)

    def wait(self, stream: SimStream | None = None) -> None:
        (stream or current_stream()).wait_event(self)

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        synchronize()

    def elapsed_time(self, end: "SimEvent") -> float:
        """Host wall time between the two records, in ms (the simulated world has no device clock)."""
        if self.t is None or end.t is None:
            raise RuntimeError("both events must be recorded before elapsed_time()")
        return (end.t - self.t) * 1e3


def _record(kind: str, op: str, **fields) -> None:
    ctx = current()
    if ctx is not None:
        ctx.trace.record(kind, op, user_site(), **fields)


def _stream_order():
    ctx = current()
    mode = ctx.extra.get("ops_mode") if ctx else None
    return mode.streams if mode is not None else None


def current_stream(device=None) -> SimStream:
    ctx = current()
    if ctx is None:
        return SimStream(stream_id=0)
    if ctx.stream is None:
        ctx.stream = default_stream()
    return ctx.stream


def default_stream(device=None) -> SimStream:
    ctx = current()
    if ctx is None:
        return SimStream(stream_id=0)
    if "default_stream" not in ctx.extra:
        ctx.extra["default_stream"] = SimStream(stream_id=0)
    return ctx.extra["default_stream"]


def set_stream(s: SimStream) -> None:
    ctx = current()
    if ctx is not None:
        ctx.stream = s


@contextlib.contextmanager
def stream(s: SimStream | None):
    ctx = current()
    if ctx is None or s is None:
        yield s
        return
    prev = current_stream()
    ctx.stream = s
    try:
        yield s
    finally:
        ctx.stream = prev


def _device_index(device) -> int:
    if isinstance(device, torch.device):
        return device.index or 0
    if isinstance(device, str):
        return torch.device(device).index or 0
    return int(device)


def set_device(device) -> None:
    ctx = current()
    if ctx is not None:
        ctx.device_index = _device_index(device)
        ctx.extra["device_set"] = True


def current_device() -> int:
    ctx = current()
    return ctx.device_index if ctx else 0


@contextlib.contextmanager
def device(dev):
    ctx = current()
    if ctx is None or dev is None:
        yield
        return
    prev = ctx.device_index
    ctx.device_index = _device_index(dev)
    try:
        yield
    finally:
        ctx.device_index = prev


def synchronize(device=None) -> None:
    """Host waits for all of the rank's device work: every stream is ordered after it, every async
    operation counts as waited."""
    _record("stream", "device_synchronize")
    so = _stream_order()
    if so is not None:
        so.synchronize()
    ctx = current()
    if ctx is not None:
        ctx.extra.get("unwaited", {}).clear()


def manual_seed(seed: int) -> None:
    ctx = current()
    if ctx is not None:
        ctx.extra["generator"].manual_seed(int(seed))


_PROPS = types.SimpleNamespace(name="pkbsim simulated GPU", major=9, minor=0, total_memory=80 * 2**30,
                               multi_processor_count=132, is_integrated=False, L2_cache_size=50 * 2**20)


def install_torch_cuda(patches: Patches, local_world_size: int) -> None:
    """Replace the torch.cuda surface with rank-aware CPU stand-ins for the length of a run."""
    cuda = torch.cuda
    noop = lambda *a, **k: None  # noqa: E731
    table = {
        "is_available": lambda: True, "is_initialized": lambda: True, "init": noop,
        "device_count": lambda: local_world_size, "current_device": current_device, "set_device": set_device,
        "device": device, "synchronize": synchronize, "Stream": SimStream, "Event": SimEvent,
        "current_stream": current_stream, "default_stream": default_stream, "set_stream": set_stream,
        "stream": stream, "manual_seed": manual_seed, "manual_seed_all": manual_seed, "seed": noop, "seed_all": noop,
        "get_device_name": lambda *a, **k: _PROPS.name, "get_device_properties": lambda *a, **k: _PROPS,
        "get_device_capability": lambda *a, **k: (_PROPS.major, _PROPS.minor),
        "memory_allocated": lambda *a, **k: 0, "max_memory_allocated": lambda *a, **k: 0,
        "memory_reserved": lambda *a, **k: 0, "max_memory_reserved": lambda *a, **k: 0,
        "reset_peak_memory_stats": noop, "empty_cache": noop,
        "mem_get_info": lambda *a, **k: (_PROPS.total_memory, _PROPS.total_memory),
    }
    for name, fn in table.items():
        patches.set(cuda, name, fn)
    for name in ("range_push", "range_pop", "mark"):
        patches.set(cuda.nvtx, name, noop)
    patches.set(cuda.nvtx, "range", lambda *a, **k: contextlib.nullcontext())
    patches.set(torch, "manual_seed", _seed_everything(torch.manual_seed))
    patches.set(torch.random, "manual_seed", _seed_everything(torch.random.manual_seed))


def _seed_everything(original):
    def manual_seed_(seed):
        ctx = current()
        if ctx is None:
            return original(seed)
        manual_seed(seed)
        return ctx.extra["generator"]
    return manual_seed_
