"""Kernel launches (and the runtime's copies and fills: copies.py) from a built extension, routed to the simulator.

The runtime stand-in calls `_on_launch` (a ctypes callback, in the launching rank's thread) with the
kernel's mangled name, grid, block, shared memory and `void** args`. The module's PTX comes from its
fatbin (fatbin.py); each argument's bytes are copied out by the parameter layout of the `.entry`. On a
simulated rank the kernel runs in that rank's world (pkbsim.device.ptx_launch); elsewhere it runs alone.
An exception in the kernel (a deadlock, a race, a memory fault) fails the launch with its message and is
re-raised by the extension function that launched it (extension.py).
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import subprocess
import threading
from dataclasses import dataclass

from pkbsim.cuda import runtime_libs
from pkbsim.cuda.copies import copy
from pkbsim.cuda.fatbin import module_ptx
from pkbsim.cuda.memory import rank_memory
from pkbsim.device import ptx_launch
from pkbsim.ptx.module import Module
from pkbsim.world.plugins import WorldState
from pkbsim.world.context import current

COOPERATIVE = 2  # SimLaunch.api of cudaLaunchCooperativeKernel (runtime/fakecudart.cpp)


class SimLaunch(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("host_fun", ctypes.c_void_p), ("module", ctypes.c_int),
                ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shmem", ctypes.c_size_t),
                ("stream", ctypes.c_void_p), ("device", ctypes.c_int), ("args", ctypes.POINTER(ctypes.c_void_p)),
                ("api", ctypes.c_int)]


@dataclass
class CallScope:
    """One call of an extension function: the tensors it was given and the first launch error."""
    tensors: list
    site: str
    origin: str
    error: BaseException | None = None


_tls = threading.local()
_modules: dict[tuple[int, int], Module] = {}
_modules_lock = threading.Lock()


@contextlib.contextmanager
def call_scope(tensors, site: str, origin: str):
    outer = getattr(_tls, "scope", None)
    _tls.scope = scope = CallScope(list(tensors), site, origin)
    try:
        yield scope
    finally:
        _tls.scope = outer


_WORLD_MODULES = WorldState(lambda world: {})  # (module index, rank) -> Module, for one run of the world


def _module(index: int, origin: str, ctx) -> Module:
    """The module's kernels for one rank of one world: each GPU has its own `__device__` variables, and
    a new run starts from their initial values."""
    cache = _modules if ctx is None else _WORLD_MODULES.of(ctx.world)
    key = (index, -1 if ctx is None else ctx.rank)
    with _modules_lock:
        mod = cache.get(key)
        if mod is None:
            mod = cache[key] = Module(module_ptx(runtime_libs.load().sim_module_fatbin(index)), origin)
        return mod


@functools.cache
def display_name(mangled: str) -> str:
    """'oneshot_allreduce' for '_Z17oneshot_allreducePPfS_ii', 'attn_fwd_kernel' for
    '_Z15attn_fwd_kernelILi64EEvPK13__nv_bfloat16...' (demangled 'void attn_fwd_kernel<64>(...)')."""
    out = subprocess.run(["c++filt", mangled], capture_output=True, text=True, check=False).stdout.strip() or mangled
    head = out.split("(")[0].split("<")[0].split()  # a template's demangled name starts with its return type
    return head[-1].split("::")[-1] if head else mangled


class LaunchRefused(Exception):
    """A launch configuration the GPU refuses: CUDA reports the error and runs nothing (torch then raises
    AcceleratorError at its next check), so the program fails as on the GPU instead of running the kernel."""


def refusal(grid: tuple, block: tuple, shmem: int, dynamic_limit: int) -> str | None:
    """Why sm_90 refuses this launch, in CUDA's words and ours, or None."""
    if 0 in grid or 0 in block or block[0] * block[1] * block[2] > 1024 or block[2] > 64 or max(grid[1:]) > 65535:
        return (f"CUDA error: invalid configuration argument (grid {grid}, block {block}: at most 1024 threads "
                f"per block, block z <= 64, grid y and z <= 65535, no zero dimension)")
    if shmem > dynamic_limit:
        return (f"CUDA error: invalid argument ({shmem} bytes of dynamic shared memory; the kernel may launch "
                f"with {dynamic_limit}: beyond 48 KiB it needs cudaFuncSetAttribute(kernel, "
                f"cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), at most 227 KiB on sm_90)")
    return None


def _run(launch: SimLaunch, scope: CallScope | None) -> None:
    why = refusal(tuple(launch.grid), tuple(launch.block), launch.shmem,
                  runtime_libs.load().sim_max_dynamic_smem(launch.host_fun))
    if why:
        raise LaunchRefused(f"launch of {display_name(launch.name.decode())} refused: {why}")
    ctx = current()
    mod = _module(launch.module, scope.origin if scope else "?", ctx)
    name = launch.name.decode()
    kernel = mod.kernel(name)
    params = bytearray(kernel.param_size)
    for i, (var, off) in enumerate(kernel.param_layout):
        params[off:off + var.size] = ctypes.string_at(launch.args[i], var.size)
    memory = rank_memory(ctx, scope.tensors if scope else [])
    grid, block = tuple(launch.grid), tuple(launch.block)
    if ctx is None:
        mod.launch_raw(name, grid, block, bytes(params), launch.shmem, memory=memory)
        return
    ptx_launch.launch(ctx, mod, name, display_name(name), grid, block, bytes(params), launch.shmem, memory,
                      scope.site if scope else "?", cooperative=launch.api == COOPERATIVE)


def _on_launch(ptr) -> int:
    scope = getattr(_tls, "scope", None)
    try:
        _run(ptr.contents, scope)
        return 0
    except BaseException as e:  # noqa: BLE001 - handed back to the extension function's caller
        return _failed(scope, e, "simulated kernel failed")


def _on_copy(dst, src, n, value) -> int:
    scope = getattr(_tls, "scope", None)
    try:
        copy(dst, src, n, value, scope.tensors if scope else (), scope.site if scope else "?")
        return 0
    except BaseException as e:  # noqa: BLE001 - handed back to the extension function's caller
        return _failed(scope, e, "simulated copy failed")


def _failed(scope: CallScope | None, e: BaseException, what: str) -> int:
    """The runtime call fails (1); the extension function re-raises the first error of its call."""
    if scope is not None and scope.error is None:
        scope.error = e
    runtime_libs.load().sim_set_error_text(f"{what}: {e}".encode()[:1000])
    return 1


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(SimLaunch))(_on_launch)
_COPY_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int)(_on_copy)


def install() -> None:
    """Load the runtime stand-in and route its launches, copies and fills here (idempotent)."""
    rt = runtime_libs.load()
    rt.sim_set_launch_callback(_CALLBACK)
    rt.sim_set_copy_callback(_COPY_CALLBACK)
