"""g++'s flags for a candidate's host unit (two_units.py) and the precompiled header of pkb's prelude.

The prelude (torch's extension headers, CUDA's runtime headers, pkb's guards) is most of a host unit's
compile time: 12.6 s for a one-kernel candidate here, 5.0 s with the precompiled header. The header is
built once per toolchain and torch into the build cache (about 0.5 GB, 25 s), by the trusted screening
process before a candidate's process starts (pipeline.build_runtime), so a candidate can only read it.
g++ uses it only where the unit's flags match the ones it was built with, and otherwise parses the
prelude itself: a candidate's own -D flags cost time, never a different meaning.

g++'s header saves the parse but not the rest: the template instantiations and inline functions the prelude
needs are made again in every unit (an empty unit with it takes 10.5 s at load 3.6 and defines 4978 symbols,
most of them pybind11's; its parse is 0.1 s). Where clang++ is installed, host units are compiled by it with a
header of its own built with `-fpch-instantiate-templates`, which makes those instantiations once, in the header
(gemini-3-pro CUDA 16's host unit, load 0.6-1.3: g++ 5.3-5.4 s, clang++ 1.8-2.1 s; the header 15 s, 108 MB).
A unit clang++ refuses (a flag or a construct it reads otherwise than g++) is compiled by g++ as before, and a
unit neither builds goes on to nvcc's whole unit, whose error is the one reported (build.py).
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import torch

from pkbsim.cuda.toolchain import (
    RUNTIME_SRC,
    cuda_home,
    file_lock,
    publish,
    python_include,
    require_nvcc,
    torch_dirs,
    wheel_headers,
)
from pkbsim.ptx.compile import trusted_cache_root

PRELUDE = os.path.join(RUNTIME_SRC, "prelude.h")
HOST_UNIT = os.path.join(RUNTIME_SRC, "host_unit.h")   # after the prelude: what nvcc declares for host code alone
KIND = "cuda-pch"   # its folder in the build cache (candidate_sandbox.TRUSTED_BUILDS)
CLANG = ("clang++", *(f"clang++-{v}" for v in range(22, 13, -1)))   # the names clang++ is installed under
# nvcc's host pass sees these from build.nvcc_flags; g++ must see the same
TORCH_MACROS = ("-DTORCH_API_INCLUDE_EXTENSION_H", "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE")
HALF_MACROS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
               "-D__CUDA_NO_HALF2_OPERATORS__")


def base_flags(slim: bool) -> list[str]:
    """g++'s flags for every host unit (and the header): torch's, Python's, pkb's and CUDA's include folders."""
    incs, _ = torch_dirs()
    nvcc = require_nvcc()
    home = cuda_home(nvcc)
    shadow = [f"-I{os.path.join(RUNTIME_SRC, 'slim')}"] if slim else []
    cccl = os.path.join(home, "include", "cccl")   # CUDA 13 keeps CCCL apart; nvcc adds it itself
    return ["-std=c++17", "-fPIC", "-w", *HALF_MACROS, *TORCH_MACROS, *shadow, *(f"-I{i}" for i in incs), f"-I{python_include()}",
            f"-I{os.path.join(RUNTIME_SRC, 'include')}", "-isystem", os.path.join(home, "include"),
            *(["-isystem", cccl] if os.path.isdir(cccl) else []), *wheel_headers(nvcc)]


def prelude_include(slim: bool) -> str:
    """What `-include` names: the precompiled prelude where the cache holds one, else the prelude. Only the
    slim prelude is precompiled: units that need all of torch are rare."""
    return (precompiled(build=False) if slim else None) or PRELUDE


@dataclass(frozen=True)
class HostCompiler:
    """One way to compile a host unit: the command before the unit's own flags and source."""
    argv: tuple[str, ...]
    include: tuple[str, ...]   # the prelude's -include (or -include-pch) arguments


def host_compilers(slim: bool) -> list[HostCompiler]:
    """The ways to try, in order: clang++ with its instantiating header (where both exist), then g++."""
    ways = []
    clang, pch = _clang(), (clang_precompiled(build=False) if slim else None)
    if clang and pch:
        ways.append(HostCompiler((clang,), ("-include-pch", pch)))
    ways.append(HostCompiler(("g++",), ("-include", prelude_include(slim))))
    return ways


def identity() -> str:
    """The host compilers' versions, for the build's cache key: which one builds a unit depends on them."""
    clang = _clang()
    return _compiler() + (_version(clang) if clang else "")


@functools.cache
def _clang() -> str | None:
    return next(filter(None, (shutil.which(name) for name in CLANG)), None)


@functools.cache
def _version(compiler: str) -> str:
    return subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False).stdout


def _compiler() -> str:
    return _version("g++")


def _entry() -> str:
    with open(PRELUDE) as f:
        parts = [f.read(), *base_flags(True), _compiler(), torch.__version__, torch.__file__]
    return os.path.join(trusted_cache_root(), KIND, hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16])


def precompiled(build: bool = True) -> str | None:
    """The precompiled slim prelude's `prelude.h` (its `.gch` beside it), built here (`build`: the trusted
    side) if the cache lacks it; None where there is none (not built, the cache read-only, no g++, the build
    failing): g++ then parses the prelude itself. A candidate's process never builds it: it would take a
    sandbox's private cache 0.5 GB of memory and 25 s each time."""
    try:
        entry = _entry()
        header = os.path.join(entry, "prelude.h")
        if build and not os.path.exists(header + ".gch"):
            with file_lock(entry + ".lock"):
                if not os.path.exists(header + ".gch"):
                    _build(entry)
        return header if os.path.exists(header + ".gch") else None
    except (OSError, subprocess.SubprocessError):
        return None


def _build(entry: str) -> None:
    tmp = tempfile.mkdtemp(prefix=".pch-", dir=os.path.dirname(entry))
    try:
        shutil.copy(PRELUDE, os.path.join(tmp, "prelude.h"))
        proc = subprocess.run(["g++", "-x", "c++-header", *base_flags(True), os.path.join(tmp, "prelude.h"),
                               "-o", os.path.join(tmp, "prelude.h.gch")], capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            publish(tmp, entry)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _clang_entry(clang: str) -> str:
    with open(PRELUDE) as f:
        parts = [f.read(), *base_flags(True), _version(clang), torch.__version__, torch.__file__, "instantiate"]
    return os.path.join(trusted_cache_root(), KIND, "clang-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16])


def clang_precompiled(build: bool = True) -> str | None:
    """clang++'s precompiled slim prelude (`prelude.pch`, its template instantiations made in it), built here
    (`build`: the trusted side) if the cache lacks it; None where there is none (no clang++, not built, the
    build failing): host units then go to g++."""
    clang = _clang()
    if clang is None:
        return None
    try:
        entry = _clang_entry(clang)
        pch = os.path.join(entry, "prelude.pch")
        if build and not os.path.exists(pch):
            with file_lock(entry + ".lock"):
                if not os.path.exists(pch):
                    _build_clang(clang, entry)
        return pch if os.path.exists(pch) else None
    except (OSError, subprocess.SubprocessError):
        return None


def _build_clang(clang: str, entry: str) -> None:
    tmp = tempfile.mkdtemp(prefix=".pch-clang-", dir=os.path.dirname(entry))
    try:   # from the prelude where it lies: clang's header names the files it read, and checks them when used
        proc = subprocess.run([clang, "-x", "c++-header", *base_flags(True), "-fpch-instantiate-templates",
                               PRELUDE, "-o", os.path.join(tmp, "prelude.pch")],
                              capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            publish(tmp, entry)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
