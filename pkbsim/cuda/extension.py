"""`load_inline` / `load` for simulated ranks: build (build.py), import once per process, and hand each
caller a proxy whose functions run the candidate's C++ with launches routed to the interpreter.

The proxy passes the call's tensors to the launch path (so the kernel's pointer arguments resolve)
and re-raises a failed launch's own exception (deadlock, race, memory fault) rather than the CUDA
error text the wrapper's error check makes of it. One loaded module serves all ranks, as C++ statics
are per process; the rank a launch belongs to is the calling thread's.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading

import torch

from pkbsim.cuda import launch, rewrite, runtime_libs
from pkbsim.cuda.build import ExtensionBuildError, build
from pkbsim.cuda.build_clock import BUILD_CLOCK
from pkbsim.errors import NotSimulated
from pkbsim.world.context import current
from pkbsim.world.sites import _is_plumbing, user_site

_imported: dict[str, object] = {}
_import_lock = threading.Lock()


def _origin(given: str | None, sources: list[str]) -> str:
    """The file the line map names: `given` (the screen's candidate) when its text holds the CUDA source,
    else the nearest caller outside pkb whose text does (a program that builds through a helper, e.g.
    ParallelKernelBench's `compile_cuda_extension`, gets its own lines, never the helper's or, through a
    helper that kept an earlier screen's stand-in, another candidate's), else `given` or the nearest caller."""
    def holds(path):
        return any(rewrite.locate(src, _read(path)) is not None for src in sources)

    if given and holds(given):
        return given
    frame, callers = sys._getframe(1), []
    while frame is not None:
        if not _is_plumbing(frame.f_code.co_filename):
            callers.append(os.path.abspath(frame.f_code.co_filename))
        frame = frame.f_back
    return next((p for p in callers if holds(p)), given or (callers[0] if callers else "<extension>"))


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _listed(x) -> list[str]:
    return [] if x is None else [x] if isinstance(x, str) else list(x)


@contextlib.contextmanager
def _building():
    """Building is not the program's run time: the world's watchdog pauses meanwhile."""
    ctx = current()
    with BUILD_CLOCK.running(), (ctx.world.watchdog_paused() if ctx is not None else contextlib.nullcontext()):
        yield


def load_inline(name, cpp_sources=None, cuda_sources=None, functions=None, extra_cflags=None,
                extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, build_directory=None,
                verbose=False, with_cuda=None, is_python_module=True, with_pytorch_error_handling=True,
                keep_intermediates=True, use_pch=False, no_implicit_headers=False, *, origin: str | None = None):
    origin = _origin(origin and os.path.abspath(origin), _listed(cuda_sources) + _listed(cpp_sources))
    # a header on extra_include_paths may declare them: then nothing is claimed
    missing = [] if extra_include_paths else rewrite.undeclared(functions, _listed(cpp_sources))
    if missing:   # pkb joins the sources into one unit, where the binding would compile: torch's build fails
        raise ExtensionBuildError(
            f"main.cpp: error: '{missing[0]}' was not declared in this scope: load_inline compiles cpp_sources and "
            f"the bindings of functions= apart from cuda_sources; declare {missing[0]} in cpp_sources", user_site())
    tu = rewrite.translation_unit(name, _listed(cuda_sources), _listed(cpp_sources), functions, origin, _read(origin))
    so, module = build(name, tu, _listed(extra_cuda_cflags), _listed(extra_include_paths), origin, _building)
    return SimExtension(_import(module, so), origin)


def load(name, sources, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
         build_directory=None, verbose=False, with_cuda=None, is_python_module=True, is_standalone=False,
         keep_intermediates=True):
    paths = [os.path.abspath(p) for p in _listed(sources)]
    texts = [_read(p) for p in paths]
    missing = [p for p, t in zip(paths, texts) if t is None]
    if missing:
        raise FileNotFoundError(f"load({name!r}): cannot read source {missing[0]}")
    tu = "".join(f'#line 1 "{p}"\n{rewrite.rewrite(t)}\n' for p, t in zip(paths, texts))
    so, module = build(name, tu, _listed(extra_cuda_cflags), _listed(extra_include_paths), paths[0], _building)
    return SimExtension(_import(module, so), paths[0])


def _import(name: str, so: str):
    with _import_lock:
        mod = _imported.get(so)
        if mod is None:
            launch.install()
            spec = importlib.util.spec_from_file_location(name, so)
            flags = sys.getdlopenflags()
            sys.setdlopenflags(runtime_libs.EXTENSION_MODE)   # its CUDA symbols from the stand-ins (runtime_libs)
            try:
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
            finally:
                sys.setdlopenflags(flags)
            _imported[so] = mod
        return mod


def _tensors(x, out: list) -> list:
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _tensors(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _tensors(y, out)
    return out


def _enter_rank_device():
    """The stand-in runtime keeps a current device per thread, from 0; a rank's C++ must see the rank's
    current device (torch.cuda.set_device, else 0), as on its GPU: `get_device()`, `cudaGetDevice`, guards.
    Returns the runtime (None off the simulated world), its note of a call it lacks cleared."""
    if current() is None:
        return None
    rt = runtime_libs.load()
    rt.sim_set_device_count(max(8, torch.cuda.device_count()))
    rt.cudaSetDevice(torch.cuda.current_device())
    rt.sim_take_unsupported()
    return rt


class SimExtension:
    """The built module, with every function wrapped for the launch path."""

    def __init__(self, module, origin: str):
        self._module, self._origin = module, origin

    def __getattr__(self, attr: str):
        value = getattr(self._module, attr)
        if not callable(value) or attr.startswith("__"):
            return value
        origin = self._origin

        def call(*args, **kwargs):
            rt = _enter_rank_device()
            with launch.call_scope(_tensors((args, kwargs), []), user_site(), origin) as scope:
                try:
                    out = value(*args, **kwargs)
                except Exception as e:
                    if scope.error is not None:
                        raise scope.error from None
                    missing = rt.sim_take_unsupported() if rt is not None else None
                    if missing:  # the candidate's own failure after a call the GPU has: pkb's limit
                        raise NotSimulated(f"CUDA call {missing.decode()} (pkb's stand-in runtime lacks it)") from e
                    raise
            if scope.error is not None:  # the wrapper did not check the launch: the failure still counts
                raise scope.error
            return out
        call.__name__ = attr
        return call

    def __dir__(self):
        return dir(self._module)
