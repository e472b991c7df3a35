"""Launching Triton kernels on a simulated rank: the interpreter made thread-safe, one program at a time.

Triton's interpreter keeps the program index on one global builder and patches `triton.language` for
the length of each launch, restoring it at the end; with one thread per rank, one rank's restore breaks
another's running kernel. Here the index and grid are thread-local and the language patch is
reference-counted (first launch patches, last one restores). Kernel arguments are already CPU tensors,
so the interpreter's host round trip (copy in, copy back) is skipped: peer writes stay visible.

Programs of a launch run in order, as the interpreter does. When a program spins on memory, a later
program of the same launch that has not started runs first (see `Launch.run_pending`): the kernel then
relies on all its programs being resident at once, which is reported.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import threading
import types
from dataclasses import dataclass, field

import torch
import triton.language as tl
from triton.runtime import interpreter as interp
from triton.runtime.jit import JITFunction

from pkbsim.device.ir import Event
from pkbsim.device.kernel_report import FlagChains, KernelWork, report_launch
from pkbsim.device.protocol import device_state, kernel_end_fence
from pkbsim.device.spin import PollSet
from pkbsim.device.spin_handoff import kernel_ended
from pkbsim.device.triton_bounds import Bounds
from pkbsim.device.triton_compile_check import check_compiles
from pkbsim.device.triton_numerics import install_numerics
from pkbsim.world.clocks import KernelClocks
from pkbsim.world.comms import is_fake
from pkbsim.world.context import current
from pkbsim.world.sites import user_site

_tls = threading.local()
_lang_lock = threading.Lock()
_lang_users = 0
_lang_scope = None
_interpreted: dict = {}
DEFAULT_WARPS = 4   # Triton's num_warps when a launch names none: a program is 128 threads


# the interpreter builds its language patch from a kernel's globals: this one names both modules it patches
_LANG_ANCHOR = types.FunctionType((lambda: None).__code__, {"tl": tl, "core": tl.core})


def _index(self) -> int:
    """A one-element tensor used as an index, e.g. a loaded bound in `range(lo, hi, BLOCK)`: triton 3.6's
    `int(self.handle.data)` fails under numpy >= 2.4, which no longer converts a 1-d array to a scalar
    (triton-lang/triton#9171)."""
    return int(self.handle.data.item())


def _enter_lang() -> None:
    global _lang_users, _lang_scope
    with _lang_lock:
        if _lang_users == 0:
            _lang_scope = interp._patch_lang(_LANG_ANCHOR)
            _lang_scope.set_attr(tl.core.tensor, "__index__", _index)
        _lang_users += 1


def _exit_lang() -> None:
    global _lang_users, _lang_scope
    with _lang_lock:
        _lang_users -= 1
        if _lang_users == 0 and _lang_scope is not None:
            _lang_scope.restore()
            _lang_scope = None


def thread_local_property(name: str, default):
    return property(lambda self: getattr(_tls, name, default), lambda self, v: setattr(_tls, name, v))


@functools.cache
def _reads_grid_size(fn) -> bool:
    """A persistent (grid-stride) kernel reads the number of programs its host launched (read once a kernel:
    launches are many)."""
    try:
        return "num_programs" in inspect.getsource(fn)
    except (OSError, TypeError):
        return False


def interpreted(fn) -> interp.InterpretedFunction:
    f = _interpreted.get(fn)
    if f is None:
        f = _interpreted[fn] = interp.InterpretedFunction(fn)
    return f


@dataclass
class Launch:
    """One kernel launch on one rank: its programs, which have run, and its peer traffic."""
    name: str
    grid: tuple[int, int, int]
    fn: object
    args: dict
    site: str
    clocks: KernelClocks  # each program on its own clock thread (pkbsim.world.clocks)
    started: set = field(default_factory=set)
    current: tuple[int, int, int] = (0, 0, 0)
    polls: PollSet = field(default_factory=PollSet)
    work: KernelWork = field(default_factory=KernelWork)
    chains: FlagChains = field(default_factory=FlagChains)
    co_resident: list[str] = field(default_factory=list)
    tensors: dict = field(default_factory=dict)  # argument name -> the tensor passed (args holds its address only)
    bounds: Bounds | None = None  # what the kernel may touch outside symmetric memory, built at its first such access

    @property
    def where(self) -> str:
        return f"{self.name}[program {','.join(map(str, self.current[:self._dims()]))}]"

    def _dims(self) -> int:
        return 3 if self.grid[2] > 1 else 2 if self.grid[1] > 1 else 1

    def programs(self):
        return itertools.product(range(self.grid[0]), range(self.grid[1]), range(self.grid[2]))

    def run_program(self, pid: tuple[int, int, int]) -> None:
        outer, outer_polls = self.current, self.polls
        self.started.add(pid)
        self.current, self.polls = pid, PollSet()
        interp.interpreter_builder.set_grid_idx(*pid)
        with current().world.lock:
            thread = self.clocks.start(len(self.started) - 1)
        try:
            with self.clocks.running(thread):
                self.fn(**self.args)
        finally:
            self.current, self.polls = outer, outer_polls
            interp.interpreter_builder.set_grid_idx(*outer)

    def run_all(self) -> None:
        for pid in self.programs():
            if pid not in self.started:
                self.run_program(pid)

    def _next_pending(self):
        return next((p for p in self.programs() if p not in self.started), None)

    def has_pending(self) -> bool:
        return self._next_pending() is not None

    def run_pending(self) -> None:
        """Run the next program that has not started (nested, while the spinning one waits)."""
        pid = self._next_pending()
        if pid is None:
            return
        waiting = self.where
        self.run_program(pid)
        self.co_resident.append(f"{waiting} waited until {self.name}[program {','.join(map(str, pid[:self._dims()]))}] ran")


def current_launch() -> Launch | None:
    return getattr(_tls, "launch", None)


def launch(fn, args: tuple, kwargs: dict, grid) -> None:
    """Run `fn` (the kernel's Python function) over `grid` on the calling rank."""
    ctx = current()
    if any(is_fake(a) for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)):
        # a shape run has no data to run the kernel on: the trace says so, and its time is unknown
        ctx.trace.record("device", "untimed_kernel", user_site(), kernel=fn.__name__)
        return
    kernel = interpreted(fn)
    rewritten = kernel.rewrite()
    executor = interp.GridExecutor(rewritten, kernel.arg_names, grid)
    accepted = inspect.getfullargspec(rewritten).args
    call_args = inspect.getcallargs(rewritten, *args, **{k: v for k, v in kwargs.items() if k in accepted})
    tensors = dict(_tensor_args(call_args))
    call_args = {n: a if n in executor.constexprs else interp._implicit_cvt(a) for n, a in call_args.items()}
    g = tuple(grid(call_args) if callable(grid) else grid)
    g = g + (1,) * (3 - len(g))
    run = Launch(fn.__name__, g, rewritten, call_args, user_site(), clocks=ctx.world.clocks.kernel(ctx.rank),
                 tensors=tensors)
    run.work.threads = 32 * int(kwargs.get("num_warps", DEFAULT_WARPS))
    run.work.reads_grid_size = _reads_grid_size(fn)
    outer = current_launch()
    _tls.launch = run
    _enter_lang()
    interp.interpreter_builder.set_grid_dim(*g)
    device_state(ctx.world).log.append(Event("kernel", ctx.rank, run.site, run.name, value=g[0] * g[1] * g[2]))
    try:
        run.run_all()
    finally:
        kernel_ended(ctx)
        with ctx.world.lock:
            kernel_end_fence(ctx, run.clocks, run.site, run.name)
            run.clocks.finish()
        _exit_lang()
        _tls.launch = outer
    _report(ctx, run)


def _tensor_args(call_args: dict):
    """(name, tensor) for every tensor argument of a launch, those inside tuple arguments too."""
    for name, a in call_args.items():
        if isinstance(a, torch.Tensor):
            yield name, a
        elif isinstance(a, tuple):
            yield from _tensor_args({f"{name}[{i}]": x for i, x in enumerate(a)})


def _report(ctx, run: Launch) -> None:
    report_launch(ctx, run.name, run.site, run.grid[0] * run.grid[1] * run.grid[2], "program", run.work,
                  run.co_resident, "triton")


def device_call(fn, args, kwargs):
    """A @triton.jit function called from inside a kernel."""
    return interpreted(fn).rewrite()(*args, **kwargs)


def patch_launches(patches) -> None:
    """Route every launch and device call of a simulated rank through `launch` / `device_call`."""
    jit_run, jit_call = JITFunction.run, JITFunction.__call__
    interp_run, interp_call = interp.InterpretedFunction.run, interp.InterpretedFunction.__call__

    def make_run(original):
        def run(self, *args, grid, warmup, **kwargs):
            if current() is None:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            if not warmup:
                check_compiles(self, args, kwargs)
                launch(self.fn, args, kwargs, grid)
        return run

    def make_call(original):
        def call(self, *args, **kwargs):
            if current() is None or current_launch() is None:
                return original(self, *args, **kwargs)
            return device_call(self.fn, args, kwargs)
        return call

    from triton.runtime.autotuner import Autotuner
    bench = Autotuner._bench

    def no_bench(self, *args, config, **meta):
        """No GPU to time an autotuner's configs on (Triton's benchmark asserts libcuda.so): every config
        computes the same result, so each times as zero and the first one runs."""
        if current() is None:
            return bench(self, *args, config=config, **meta)
        return [0.0, 0.0, 0.0]

    patches.set(Autotuner, "_bench", no_bench)
    patches.set(JITFunction, "run", make_run(jit_run))
    patches.set(JITFunction, "__call__", make_call(jit_call))
    patches.set(interp.InterpretedFunction, "run", make_run(interp_run))
    patches.set(interp.InterpretedFunction, "__call__", make_call(interp_call))
    patches.set(interp.InterpreterBuilder, "grid_idx", thread_local_property("grid_idx", None))
    patches.set(interp.InterpreterBuilder, "grid_dim", thread_local_property("grid_dim", (1, 1, 1)))
    install_numerics(patches)
