"""CUDA on the CPU: "cuda" devices, torch.cuda streams/events/devices, mapped onto each rank's thread.

`DeviceMapMode` (a per-thread TorchFunctionMode) rewrites device="cuda[:i]" (and integer devices) to the
CPU in factories, `.to()` and `.cuda()`, tags what the program creates on or moves to a device
(device_identity.py), and gives random factories and nn.init the rank's own generator, so ranks do not
share the process-wide RNG. `install_torch_cuda` replaces the torch.cuda functions programs call with
versions that answer for the calling rank (the GPU's properties from the topology, gpu_model.py); the
others end the run as not simulated, naming the call. Streams are recorded (ids, wait edges) for the
timing engine and move the rank's stream clocks (pkbsim.world.clocks); every stream runs synchronously on
the CPU. Host reads of device data (`.tolist()`, `.cpu()`, printing) are host waits (host_sync.py).
"""
from __future__ import annotations

import contextlib
import inspect
import itertools
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.cuda.nccl
from torch.overrides import TorchFunctionMode

from pkbsim.errors import NotSimulated
from pkbsim.world import host_sync
from pkbsim.standins.unsimulated import refuse_on_ranks

from pkbsim.world.context import current
from pkbsim.standins.device_identity import bound_device  # noqa: F401 - process_group imports it from here
from pkbsim.standins.device_identity import program_frame, seen_device, tag, tagged, target_device
from pkbsim.standins.gpu_model import DEFAULT_TOPOLOGY, device_properties
from pkbsim.world.patching import Patches
from pkbsim.world.sites import user_site

# nn.init functions are torch functions of their own: the tensor methods they call run with this mode off
# and would draw from the process-wide generator, so the rank's generator is passed to them here
# (function -> the position of its `generator` parameter)
_INIT = {f: list(inspect.signature(f).parameters).index("generator") for f in vars(torch.nn.init).values()
         if getattr(f, "__module__", "") == "torch.nn.init" and not getattr(f, "__name__", "_").startswith("_")
         and "generator" in inspect.signature(f).parameters}
_RANDOM = {torch.randn, torch.rand, torch.randint, torch.randperm, torch.normal, torch.multinomial,
           torch.bernoulli, torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.random_,
           torch.Tensor.bernoulli_, torch.Tensor.exponential_} | set(_INIT)
_MOVES = {torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu}
# torch's CUDA sort keeps ties in index order: its default sort equalled the stable one on every row of 14
# shapes on an H200, the CPU's on 0-37% (benchmarks/pkb_disagreement_probe.py, results/pkb_agreement/probe_h200.json)
_SORTS = {torch.sort: ("dim", "descending"), torch.Tensor.sort: ("dim", "descending"),
          torch.argsort: ("dim", "descending", "stable"), torch.Tensor.argsort: ("dim", "descending", "stable")}
# host reads of device data that dispatch no op the rank's ops mode sees (it sees `.item()` and the like)
_HOST_READS = {torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__repr__, torch.Tensor.__str__,
               torch.Tensor.__format__, torch.Tensor.cpu}
# torch's CUDA topk lists ties in index order (k of 1 to 200 in rows of 1024 to 100000 on an H200, every
# row; results/pkb_agreement/ties_h200.json), the CPU's does not: a simulated GPU takes them from a stable sort
_TOPK = {torch.topk: ("k", "dim", "largest", "sorted"), torch.Tensor.topk: ("k", "dim", "largest", "sorted")}
_SPECIAL = _RANDOM | _MOVES | set(_SORTS) | set(_TOPK) | _HOST_READS | {torch.Tensor.pin_memory}


CUDA = torch.device("cuda")


def _is_cuda(dev) -> bool:
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    if isinstance(dev, str):
        return dev.startswith("cuda")
    return isinstance(dev, int) and not isinstance(dev, bool)


def _is_device(x) -> bool:
    return isinstance(x, (str, torch.device)) or (isinstance(x, int) and not isinstance(x, bool))


class DeviceMapMode(TorchFunctionMode):
    def __init__(self, generator: torch.Generator):
        super().__init__()
        self.generator = generator

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if not kwargs and func not in _SPECIAL:
            return func(*args)
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.pin_memory:
            return args[0]
        if func in _HOST_READS or (func is torch.Tensor.to and _to_host(args, kwargs)):
            _host_read(sys._getframe(1))
        if kwargs.get("pin_memory"):  # torch.tensor/empty/zeros(..., pin_memory=True): a CPU build has no pinned
            kwargs["pin_memory"] = False  # allocator; the simulated GPU reads host memory anyway
        asked = kwargs.get("device")  # the device the program names, if any
        if asked is not None and _is_cuda(asked):
            _note_explicit_device(asked)
            kwargs["device"] = "cpu"
        if func is torch.Tensor.cuda:
            # .cuda(), .cuda(None) (Module.cuda() passes None on): the rank's current device
            asked = args[1] if len(args) > 1 and args[1] is not None else asked if asked is not None else "cuda"
            if asked != "cuda":
                _note_explicit_device(asked)
        elif func is torch.Tensor.cpu:
            asked = "cpu"
        elif func is torch.Tensor.to and len(args) > 1 and (_is_device(args[1]) or isinstance(args[1], torch.Tensor)):
            asked = args[1]
            if _is_cuda(asked):
                _note_explicit_device(asked)
                args = (args[0], "cpu", *args[2:])
        if func in _SORTS and _on_gpu(args[0]):
            args, kwargs = args[:1], {**kwargs, **dict(zip(_SORTS[func], args[1:])), "stable": True}
        if func in _TOPK and _on_gpu(args[0]) and "out" not in kwargs:
            return _gpu_topk(args[0], **{**dict(zip(_TOPK[func], args[1:])), **kwargs})
        if func in _RANDOM and kwargs.get("generator") is None and len(args) <= _INIT.get(func, len(args)):
            kwargs["generator"] = self.generator
        out = args[0] if func is torch.Tensor.cuda else func(*args, **kwargs)
        if (asked is not None or func is torch.Tensor.to) and isinstance(out, torch.Tensor):
            out = _place(func, args, out, asked)
        return out


def _to_host(args, kwargs) -> bool:
    dev = kwargs.get("device", args[1] if len(args) > 1 else None)
    return isinstance(dev, (str, torch.device)) and torch.device(dev).type == "cpu"


_SIMULATOR = frozenset({"pkbsim", "triton"})  # the simulator and the Triton interpreter read data of their own


def _host_read(frame) -> None:
    """A host read of device data by the program, or by torch's Python code on its behalf (`np.asarray(t)`,
    an object collective's `.cpu()`), not by the simulator."""
    ctx = current()
    while frame is not None and frame.f_code.co_name == "__torch_function__":
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    if ctx is not None and module.partition(".")[0] not in _SIMULATOR:
        from pkbsim.world.ops_mode import host_read
        host_read(ctx)


def _gpu_topk(x: torch.Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """topk with ties in index order, as the GPU gives them (NaN counts as the largest, as in topk); contiguous,
    as torch's are (a kernel that walks them by raw pointer read another row's entries from a narrowed view)."""
    values, indices = torch.sort(x, dim=dim, descending=largest, stable=True)
    return torch.return_types.topk((values.narrow(dim, 0, k).contiguous(), indices.narrow(dim, 0, k).contiguous()))


def _on_gpu(t) -> bool:
    """A simulated GPU's tensor: one the program did not make on, or move to, the host."""
    return isinstance(t, torch.Tensor) and (tagged(t) or CUDA).type == "cuda"


def _place(func, args, out, asked):
    """Tag what the program's own code creates on, or moves to, a device (device_identity.py). A move between
    devices the program sees as different is a copy, as on the GPU."""
    ctx = current()
    if ctx is None or not program_frame(sys._getframe(2)):
        return out
    if func not in _MOVES:
        tag(out, target_device(asked, ctx))
        return out
    src = args[0]
    have = seen_device(src, src.device, ctx)
    if asked is None:  # .to(dtype) stays where it is
        want = have
    elif isinstance(asked, torch.Tensor):
        want = seen_device(asked, asked.device, ctx)
    else:
        want = target_device(asked, ctx)
    if out is src:
        if want == have:
            return out
        out = src.clone()
    tag(out, want)
    return out


def _note_explicit_device(dev) -> None:
    """Remember "cuda:i" written out by the program: NCCL uses the tensors' device, not the current one."""
    index = dev if isinstance(dev, int) else torch.device(dev).index
    ctx = current()
    if index is not None and ctx is not None:
        ctx.explicit_device = index


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
        ctx = current()
        if ctx is not None:
            with ctx.world.lock:
                clocks = ctx.world.clocks
                clocks.stream_waits(ctx.rank, self.sim_id, clocks.stream_clock(ctx.rank, other.sim_id))

    def wait_event(self, event: "SimEvent") -> None:
        _record("stream", "wait_event", stream=self.sim_id, event=event.sim_id)
        so = _stream_order()
        if so is not None:
            so.wait_event(self.sim_id, event.sim_id)
        ctx = current()
        if ctx is not None and event.clock is not None:
            with ctx.world.lock:
                ctx.world.clocks.stream_waits(ctx.rank, self.sim_id, event.clock)

    def record_event(self, event: "SimEvent | None" = None) -> "SimEvent":
        event = event or SimEvent()
        event.record(self)
        return event

    def synchronize(self) -> None:
        _host_waits(lambda ctx: host_sync.wait_streams(ctx, [self.sim_id]))

    def query(self) -> bool:
        """Always done here: a program that polls it before reading results learns what the stream did."""
        ctx = current()
        if ctx is not None:
            host_sync.wait_streams(ctx, [self.sim_id])
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
        self.clock: tuple[int, ...] | None = None  # its stream's clock at the last record (pkbsim.world.clocks)

    def record(self, stream: SimStream | None = None) -> None:
        self.t = time.perf_counter()
        s = stream or current_stream()
        _record("stream", "event_record", stream=s.sim_id, event=self.sim_id)
        so = _stream_order()
        if so is not None:
            so.record_event(self.sim_id, s.sim_id)
        ctx = current()
        if ctx is not None:
            with ctx.world.lock:
                self.clock = ctx.world.clocks.stream_clock(ctx.rank, s.sim_id)

    def wait(self, stream: SimStream | None = None) -> None:
        (stream or current_stream()).wait_event(self)

    def query(self) -> bool:
        """Always done here: a program that polls it before reading results learns what it recorded."""
        ctx = current()
        if ctx is not None:
            host_sync.wait_clock(ctx, self.clock)
        return True

    def synchronize(self) -> None:
        _host_waits(lambda ctx: host_sync.wait_clock(ctx, self.clock))

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
    mode = ctx.ops_mode if ctx else None
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
    if ctx.default_stream is None:
        ctx.default_stream = SimStream(stream_id=0)
    return ctx.default_stream


def set_stream(s: SimStream) -> None:
    ctx = current()
    if ctx is not None:
        _switch(ctx, s)


def _switch(ctx, s: SimStream) -> None:
    """Make `s` the rank's current stream: its device work runs on that stream's clock thread."""
    ctx.stream = s
    with ctx.world.lock:
        ctx.world.clocks.use_stream(ctx.rank, s.sim_id)


@contextlib.contextmanager
def stream(s: SimStream | None):
    ctx = current()
    if ctx is None or s is None:
        yield s
        return
    prev = current_stream()
    _switch(ctx, s)
    try:
        yield s
    finally:
        _switch(ctx, prev)


def _device_index(device) -> int:
    """A CUDA device index as torch.cuda takes it ("cuda" and None: the current device)."""
    if isinstance(device, (str, torch.device)):
        d = torch.device(device)
        if d.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {d}")
        return current_device() if d.index is None else d.index
    return current_device() if device is None else int(device)


def set_device(device) -> None:
    ctx = current()
    if ctx is not None:
        ctx.device_index = _device_index(device)
        ctx.device_set = True


def current_device() -> int:
    ctx = current()
    return ctx.device_index if ctx else 0


class device:
    """torch.cuda.device: a class, as torch's (torch.load and isinstance checks rely on it)."""

    def __init__(self, device):
        self.idx = -1 if device is None or device == -1 else _device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        ctx = current()
        if ctx is not None and self.idx >= 0:
            self.prev_idx, ctx.device_index = ctx.device_index, self.idx

    def __exit__(self, *exc):
        ctx = current()
        if ctx is not None and self.idx >= 0:
            ctx.device_index = self.prev_idx
        return False


def synchronize(device=None) -> None:
    """Host waits for all of the rank's device work: every stream is ordered after it, every async
    operation counts as waited."""
    _host_waits()


def _host_waits(learn: Callable[[Any], None] = host_sync.wait_streams) -> None:
    """A host synchronisation. The trace and the local stream order (streams.py) see a full synchronize, as
    they always have; the clocks `learn` only what was waited for (a stream, an event; by default every
    stream)."""
    _record("stream", "device_synchronize")
    ctx = current()
    if ctx is not None:
        from pkbsim.world.ops_mode import host_wait
        host_wait(ctx)
        ctx.unwaited.clear()
        learn(ctx)


def manual_seed(seed: int) -> None:
    ctx = current()
    if ctx is not None:
        ctx.generator.manual_seed(int(seed))


def _generator() -> torch.Generator:
    return current().generator


class _Cudart:
    """torch.cuda.cudart(): the names torch's binding has (torch/csrc/cuda/shared/cudart.cpp), no others.
    Profiler markers are no-ops and memory info is the modelled GPU's; a name the binding lacks (e.g.
    cudaMemcpyAsync) raises AttributeError as on a GPU: the candidate's bug, not a limit of pkb."""

    _BOUND = ("cudaGetErrorString", "cudaProfilerStart", "cudaProfilerStop", "cudaHostRegister",
              "cudaHostUnregister", "cudaStreamCreate", "cudaStreamDestroy", "cudaMemGetInfo", "cudaError")

    def __init__(self, props):
        self._props = props

    def cudaProfilerStart(self) -> int:
        return 0

    def cudaProfilerStop(self) -> int:
        return 0

    def cudaMemGetInfo(self, device=None) -> tuple[int, int]:
        return self._props().total_memory, self._props().total_memory

    def __getattr__(self, name: str):
        if name in self._BOUND:
            raise NotSimulated(f"not simulated: torch.cuda.cudart().{name}")
        raise AttributeError(f"module 'torch._C._cudart' has no attribute '{name}' (torch's cudart binding "
                             f"has only {', '.join(self._BOUND)})")


def _not_simulated(name: str, original):
    """A torch.cuda entry with no stand-in: on a rank it ends the run as not simulated, naming the call."""
    return refuse_on_ranks(f"torch.cuda.{name}", original)


def install_torch_cuda(patches: Patches, local_world_size: int, topology: str = DEFAULT_TOPOLOGY) -> None:
    """Replace the torch.cuda surface with rank-aware CPU stand-ins for the length of a run; the GPU's
    properties are those of `topology`. Entries without a stand-in report themselves as not simulated."""
    cuda = torch.cuda
    noop = lambda *a, **k: None  # noqa: E731
    zero = lambda *a, **k: 0  # noqa: E731
    props = lambda *a, **k: device_properties(topology)  # noqa: E731
    table = {
        "is_available": lambda: True, "is_initialized": lambda: True, "init": noop,
        "device_count": lambda: local_world_size, "current_device": current_device, "set_device": set_device,
        "device": device, "synchronize": synchronize, "Stream": SimStream, "Event": SimEvent,
        "current_stream": current_stream, "default_stream": default_stream, "set_stream": set_stream,
        "stream": stream, "manual_seed": manual_seed, "manual_seed_all": manual_seed, "seed": noop, "seed_all": noop,
        "initial_seed": lambda: _generator().initial_seed(),
        "get_rng_state": lambda *a, **k: _generator().get_state(),
        "set_rng_state": lambda state, *a, **k: _generator().set_state(state),
        "get_rng_state_all": lambda: [_generator().get_state()],
        "set_rng_state_all": lambda states: _generator().set_state(states[0]),
        "get_device_name": lambda *a, **k: props().name, "get_device_properties": props,
        "get_device_capability": lambda *a, **k: (props().major, props().minor),
        "get_arch_list": lambda: [f"sm_{props().major}{props().minor}"],
        "is_bf16_supported": lambda *a, **k: props().major >= 8, "is_tf32_supported": lambda: props().major >= 8,
        "can_device_access_peer": lambda *a: True, "is_current_stream_capturing": lambda: False,
        "memory_allocated": zero, "max_memory_allocated": zero, "memory_reserved": zero, "max_memory_reserved": zero,
        "memory_stats": lambda *a, **k: {}, "memory_summary": lambda *a, **k: "",
        "reset_peak_memory_stats": noop, "reset_max_memory_allocated": noop, "reset_accumulated_memory_stats": noop,
        "empty_cache": noop, "ipc_collect": noop, "set_per_process_memory_fraction": noop,
        "mem_get_info": lambda *a, **k: (props().total_memory, props().total_memory),
        "cudart": lambda: _Cudart(props),
    }
    for name, fn in table.items():
        patches.set(cuda, name, fn)
    for name, obj in list(vars(cuda).items()):
        if (name not in table and not name.startswith("_") and isinstance(obj, types.FunctionType)
                and obj.__module__.startswith("torch.cuda")):
            patches.set(cuda, name, _not_simulated(name, obj))
    for name in ("CUDAGraph", "graph", "ExternalStream", "MemPool"):
        patches.set(cuda, name, _not_simulated(name, getattr(cuda, name)))
    patches.set(cuda.nccl, "version", _not_simulated("nccl.version", cuda.nccl.version))
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
        return ctx.generator
    return manual_seed_
