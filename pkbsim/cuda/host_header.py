"""g++'s flags for a candidate's host unit (two_units.py) and the precompiled header of pkb's prelude.

The prelude (torch's extension headers, CUDA's runtime headers, pkb's guards) is most of a host unit's
compile time: 12.6 s for a one-kernel candidate here, 5.0 s with the precompiled header. The header is
built once per toolchain and torch into the build cache (about 0.5 GB, 25 s), by the trusted screening
process before a candidate's process starts (pipeline.build_runtime), so a candidate can only read it.
g++ uses it only where the unit's flags match the ones it was built with, and otherwise parses the
prelude itself: a candidate's own -D flags cost time, never a different meaning.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

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


@functools.cache
def _compiler() -> str:
    return subprocess.run(["g++", "--version"], capture_output=True, text=True, check=False).stdout


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
