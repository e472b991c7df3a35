"""A Triton kernel is compiled by Triton's own compiler, for the GPU the world models, before its first
launch on a simulated rank runs it under the interpreter.

The interpreter runs a kernel's Python as Python, so it accepts what Triton's code generator rejects
(`continue` in a loop, unsupported constructs, type errors only compilation sees): ParallelKernelBench
problem 56's ring-attention kernel passed the screen and failed on an H200 with UnsupportedLanguageConstruct.
The compiler needs no GPU (only its target), so the screen raises the front end's own verdicts
(UnsupportedLanguageConstruct, a failed static assertion) where the program launches the kernel. Other
compilation errors are ignored: the code generator runs in a world whose triton.language the interpreter
has patched (our own corpus's int-to-pointer casts failed inside it), so they may be pkb's.
"""
from __future__ import annotations

import contextlib
import threading

from triton.runtime.jit import JITFunction, create_function_from_signature

from pkbsim.cuda.build_clock import BUILD_CLOCK
from pkbsim.world.context import current

TARGET = ("cuda", 90, 32)  # Hopper (sm_90), warp size 32: the GPUs the topologies model

_checked: dict[tuple, BaseException | None] = {}  # (kernel, specialization) -> what compiling it raised
_lock = threading.Lock()
_views: dict[object, tuple] = {}  # kernel's Python function -> (JITFunction, target, backend, binder), built once


def _compiler_view(kernel, GPUTarget, make_backend) -> tuple:
    """What Triton's launcher precomputes per device, built once per kernel (not at every launch)."""
    view = _views.get(kernel.fn)
    if view is None:
        jit = kernel if isinstance(kernel, JITFunction) else JITFunction(kernel.fn)
        target = GPUTarget(*TARGET)
        backend = make_backend(target)
        view = _views[kernel.fn] = (jit, target, backend,
                                    create_function_from_signature(jit.signature, jit.params, backend))
    return view


def check_compiles(kernel, args: tuple, kwargs: dict) -> None:
    """Raise the CompilationError Triton's compiler gives `kernel` for these arguments (once per kernel and
    specialization); return quietly otherwise, also when the compiler cannot run here."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile, make_backend
    from triton.compiler.errors import CompilationError, CompileTimeAssertionFailure, UnsupportedLanguageConstruct

    try:
        jit, target, backend, binder = _compiler_view(kernel, GPUTarget, make_backend)
        bound, specialization, options = binder(*args, **kwargs)
        key = (jit.fn, repr(specialization), repr(sorted(kwargs.items())))
    except Exception:  # noqa: BLE001 - pkb cannot build the compiler's view of this launch: not checked
        return
    with _lock:
        if key in _checked:
            if _checked[key] is not None:
                raise _checked[key]
            return
    error = None
    ctx = current()
    try:
        options, signature, constexprs, attrs = jit._pack_args(backend, kwargs, bound, specialization, options)
        # a build: off the stage's clock, and the world's watchdog waits for it as for an extension build
        with BUILD_CLOCK.running(), (ctx.world.watchdog_paused() if ctx else contextlib.nullcontext()):
            compile(ASTSource(jit, signature, constexprs, attrs), target=target, options=options.__dict__)
    except (UnsupportedLanguageConstruct, CompileTimeAssertionFailure) as e:
        error = e  # the front end's own verdict on the kernel's source
    except (CompilationError, Exception):  # noqa: BLE001 - an error inside the code generator may be the
        error = None  # interpreter's patches of triton.language seen by the compiler here: not the candidate's
    with _lock:
        _checked[key] = error
    if error is not None:
        raise error
