"""Loading a candidate file on a simulated rank, with inline CUDA extensions built for the simulator.

Each rank imports the file as its own module (no module state is shared between ranks, as with one
process per GPU). `torch.utils.cpp_extension.load_inline`/`load` are replaced while candidates run: the
CUDA sources are first compile-checked device-only (cuda_check.py, seconds), and a compile error stops
the rank; then the whole extension is built for the CPU (pkbsim.cuda) and its kernels run on the PTX
interpreter in the rank's world. Without nvcc the extension's functions exist but raise NotSimulated.
What pkb cannot run (an unsupported feature, a header or package not installed here) is a limit of pkb,
recorded in `Session.not_simulated`, never a fault of the candidate.
"""
from __future__ import annotations

import contextlib
import importlib.util
import inspect
import itertools
import os
import sys
import threading
from dataclasses import dataclass, field

from pkbsim.errors import CandidateFault, NotSimulated
from pkbsim.screen.cuda_check import CompileReport, compile_check
from pkbsim.screen.limits import CANDIDATE_MODULE, limit_of
from tasks.api import signature_problem


class CandidateError(CandidateFault):
    """The file cannot become a candidate: it fails to import, does not compile or its `solution` has the
    wrong signature; `kind` is the reject reason."""

    def __init__(self, kind: str, message: str, site: str = ""):
        super().__init__(message)
        self.kind, self.site = kind, site


class RecordedLimit(NotSimulated):
    """A limit of pkb the session has recorded already (`Session.limit`): it stops the rank, and nothing
    on its way out records it again."""


@dataclass
class Session:
    """What loading and calling the candidate ran into during one screen, across all ranks and runs."""
    path: str
    reports: dict = field(default_factory=dict)     # extension name -> CompileReport of its CUDA sources
    not_simulated: set = field(default_factory=set)  # pkb's limits the candidate ran into, one line each
    problems: list = field(default_factory=list)    # CandidateErrors raised while loading
    solution_site: str = ""                          # 'path:line' of the loaded `solution`
    lock: threading.Lock = field(default_factory=threading.Lock)

    def mentions(self, text: str) -> bool:
        """Whether the candidate's source contains `text` (e.g. `triton.jit`: Triton kernels run at screen
        size but not in shape runs)."""
        try:
            with open(self.path) as f:
                return text in f.read()
        except OSError:
            return False

    def limit(self, what: str) -> RecordedLimit:
        """Record a limit of pkb; the returned exception stops the rank."""
        with self.lock:
            self.not_simulated.add(what)
        return RecordedLimit(what)

    def fail(self, err: CandidateError) -> CandidateError:
        with self.lock:
            if not any(p.kind == err.kind and str(p) == str(err) for p in self.problems):
                self.problems.append(err)
        return err

    def build(self, name: str, cuda_sources: list[str], full_build, origin: Origin):
        """Compile-check `cuda_sources`; then `full_build()` (the real extension) when nvcc is here, else a
        stand-in whose functions raise NotSimulated. Errors name the candidate's own line as their site,
        also when a helper module beside it holds the sources."""
        source = "\n".join(cuda_sources)
        own = origin.file == self.path
        with self.lock:
            report = self.reports.get(name)
            if report is None:
                report = self.reports[name] = compile_check(source) if source.strip() else CompileReport("ok")
        if report.status == "missing" and not _on_include_path(source):
            raise self.limit(f"extension {name!r}: {report.message}")
        if report.status == "error":
            offset = _offset_in_file(origin.file, source)
            line = report.line + offset if report.line is not None and offset is not None else None
            where = f"{os.path.basename(origin.file)}:{line}" if line else f"extension {name!r}"
            site = (f"{self.path}:{line}" if line else "") if own else origin.entry
            raise self.fail(CandidateError("compile_error", f"{where}: nvcc: error: {report.message}", site))
        from pkbsim.cuda.toolchain import unavailable
        why = unavailable()
        if why is not None:
            return _StubExtension(name, self, why)
        from pkbsim.cuda.build import ExtensionBuildError, MissingHeader
        try:
            return _SimulatedExtension(name, full_build(), self)
        except MissingHeader as e:
            raise self.limit(f"extension {name!r}: {e}") from None
        except ExtensionBuildError as e:
            raise self.fail(CandidateError("compile_error", str(e), e.site if own else origin.entry)) from None


def _on_include_path(source: str) -> bool:
    """Whether the headers the compile check lacked come from the extension's include paths, which that
    check does not have (ThunderKittens): the full build then says whether they are installed."""
    from pkbsim.cuda.thunderkittens import uses_thunderkittens
    return uses_thunderkittens(source)


@dataclass
class Origin:
    """Where a `load_inline` call comes from: the file holding its sources (the candidate's, or a helper
    module's), and the candidate's own line on the way to that call ('path:line')."""
    file: str
    entry: str

    @classmethod
    def of_caller(cls, candidate: str) -> Origin:
        from pkbsim.world.sites import _is_plumbing
        frame, file, entry = sys._getframe(2), None, ""
        while frame is not None and not entry:
            name = os.path.abspath(frame.f_code.co_filename)
            if file is None and not _is_plumbing(frame.f_code.co_filename):
                file = name
            if name == candidate:
                entry = f"{candidate}:{frame.f_lineno}"
            frame = frame.f_back
        return cls(file or candidate, entry)


class _StubExtension:
    def __init__(self, name: str, owner: Session, why: str):
        self._name, self._owner, self._why = name, owner, why

    def __getattr__(self, fn: str):
        if fn.startswith("__"):
            raise AttributeError(fn)

        def not_simulated(*args, **kwargs):
            raise self._owner.limit(f"inline CUDA function {self._name}.{fn} ({self._why})")
        return not_simulated


class _SimulatedExtension:
    """A built extension whose kernels run on the interpreter; what the interpreter does not model is
    recorded as not simulated (it goes to hardware), not held against the candidate."""

    def __init__(self, name: str, ext, owner: Session):
        self._name, self._ext, self._owner = name, ext, owner

    def __getattr__(self, fn: str):
        value = getattr(self._ext, fn)
        if not callable(value) or fn.startswith("__"):
            return value

        def call(*args, **kwargs):
            try:
                return value(*args, **kwargs)
            except RecordedLimit:
                raise
            except NotSimulated as e:  # the interpreter's
                raise self._owner.limit(f"inline CUDA function {self._name}.{fn}: {e}") from None
        return call


def _offset_in_file(path: str, source: str) -> int | None:
    """Lines before `source` starts inside the candidate file (sources are usually string literals there)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    lines = [ln for ln in source.splitlines() if ln.strip()]
    if not lines:
        return None
    at = text.find(lines[0])
    if at < 0:
        return None
    first = source.splitlines().index(lines[0])
    return text.count("\n", 0, at) - first


def _sources(x) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


_screening: list[Session] = []  # the session of the screen under way (one at a time per process)


def _load_inline(name, cpp_sources=None, cuda_sources=None, *args, **kwargs):
    from pkbsim.cuda import extension
    ext = _screening[-1]
    origin = Origin.of_caller(ext.path)
    return ext.build(name, _sources(cuda_sources), lambda: extension.load_inline(
        name, cpp_sources, cuda_sources, *args, origin=origin.file, **kwargs), origin)


def _load(name, sources, *args, **kwargs):
    from pkbsim.cuda import extension
    ext = _screening[-1]
    texts = []
    for p in _sources(sources):
        if p.endswith((".cu", ".cuh")):
            with open(p) as f:
                texts.append(f.read())
    return ext.build(name, texts, lambda: extension.load(name, sources, *args, **kwargs), Origin.of_caller(ext.path))


_load_inline.pkb_stand_in = _load.pkb_stand_in = True


@contextlib.contextmanager
def extension_stand_in(ext: Session):
    """Replace torch's extension builders for the duration of a screen. The stand-ins find the screen under
    way when called, not when installed: a helper module that imported `load_inline` by name during an earlier
    screen in the same worker (ParallelKernelBench's compile helper does) builds for the current candidate."""
    import torch.utils.cpp_extension as cpp

    saved = cpp.load_inline, cpp.load
    cpp.load_inline, cpp.load = _load_inline, _load
    _screening.append(ext)
    try:
        yield ext
    finally:
        _screening.pop()
        cpp.load_inline, cpp.load = saved


_ids = itertools.count()
# one rank imports at a time: CPython 3.11's parser is not thread-safe (source parsed at import time, e.g. by a
# module-level @torch.jit.script, raised "SystemError: AST constructor recursion depth mismatch" on one rank)
_importing = threading.Lock()


_OWN_PACKAGES = {"pkbsim", "pkb", "tasks", "hwbackend", "candidate_sandbox"}


@contextlib.contextmanager
def _rank_private_modules(path: str):
    """Helper modules the candidate imports from its own tree (ParallelKernelBench's `utils` package, next
    to the solution folders) are the importing rank's own, as each process of a torchrun job has its own:
    `utils/parallelkittens_runtime.py` caches a TKParallelTensor per device count at module level, which
    rank threads sharing one module would hand each other. Libraries and pkb's own packages stay shared."""
    base = os.path.dirname(os.path.dirname(path)) + os.sep

    def private(name: str, mod) -> bool:
        f = getattr(mod, "__file__", None)
        return bool(f) and os.path.abspath(f).startswith(base) and "-packages" + os.sep not in f and \
            name.split(".")[0] not in _OWN_PACKAGES and not name.startswith(("pkb_", CANDIDATE_MODULE))

    saved = {n: m for n, m in list(sys.modules.items()) if private(n, m)}
    for n in saved:
        del sys.modules[n]
    before = set(sys.modules)
    try:
        yield
    finally:
        for n in set(sys.modules) - before:
            if private(n, sys.modules.get(n)):
                sys.modules.pop(n, None)
        sys.modules.update(saved)


def loader(session: Session, reference):
    """A function that imports the candidate on the calling rank and returns its checked `solution`."""
    path = os.path.abspath(session.path)

    def load():
        spec = importlib.util.spec_from_file_location(f"{CANDIDATE_MODULE}{next(_ids)}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            with _importing, _rank_private_modules(path):
                spec.loader.exec_module(module)
        except (CandidateError, RecordedLimit):
            raise
        except SyntaxError as e:
            raise session.fail(CandidateError("compile_error", f"{os.path.basename(path)}:{e.lineno}: syntax error: "
                                                               f"{e.msg}", f"{path}:{e.lineno}")) from None
        except ImportError as e:
            if limit_of(e):
                raise session.limit(limit_of(e)) from None
            raise session.fail(CandidateError("import_error", f"importing {os.path.basename(path)} failed: {e}")) from None
        fn = getattr(module, "solution", None)
        problem = signature_problem(fn, reference)
        if problem:
            raise session.fail(CandidateError("signature", problem, path))
        code = getattr(inspect.unwrap(fn), "__code__", None)  # a decorated solution (@torch.no_grad()): its own line
        session.solution_site = f"{code.co_filename}:{code.co_firstlineno}" if code else path
        return fn
    return load
