"""CUDA source -> PTX with nvcc, cached by content hash in the user's cache directory.

The cache key covers the source, the flags and the nvcc version, so a toolchain upgrade never serves
stale PTX. Writes go to a temporary name first and are renamed into place (safe under concurrency).
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

from candidate_sandbox import nvidia_wheel_folders
from pkbsim.errors import CannotSimulate

from .errors import CompileError

ARCH = "sm_90a"
BASE_FLAGS = ("--ptx", f"-arch={ARCH}", "-O3", "-lineinfo", "-std=c++17")
# The device-side macros torch's load_inline always passes: candidates are written against them.
TORCH_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
               "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
               "--expt-relaxed-constexpr")


def cache_root() -> str:
    """$PKB_CACHE_DIR, else $XDG_CACHE_HOME/pkb, else ~/.cache/pkb (every pkb build cache lives below it)."""
    return os.environ.get("PKB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pkb")


# where the screened candidate's own extension builds go: set in its process by pkbsim/screen/confinement.py
EXTENSION_CACHE = "PKB_EXTENSION_CACHE"
# where pkb's own builds (candidate_sandbox.TRUSTED_BUILDS) are, in a candidate's process whose cache_root() is
# its own cache: set there by confinement.py, read-only there
TRUSTED_CACHE = "PKB_TRUSTED_CACHE"


def trusted_cache_root() -> str:
    """The cache that holds pkb's own builds: the machine's, also in a candidate's process."""
    return os.environ.get(TRUSTED_CACHE) or cache_root()


def cache_dir() -> str:
    return os.path.join(cache_root(), "ptx")


NVCC_MISSING = ("nvcc not found: install pkb's CUDA toolchain with pip install -e '.[cuda]' (or a CUDA toolkit), "
                "or set PKB_NVCC or CUDA_HOME")
SYSTEM_HOMES = ("/usr/local/cuda",)  # where a system toolkit lives when neither PATH nor $CUDA_HOME names it
WHEEL_NVCC = ("cu13", "bin", "nvcc")  # below the `nvidia` namespace package: NVIDIA's wheels of pkb's cuda extra


def find_nvcc(system_homes: tuple[str, ...] = SYSTEM_HOMES, site_dirs: list[str] | None = None) -> str | None:
    """$PKB_NVCC, else a system toolkit (nvcc on PATH, under $CUDA_HOME or `system_homes`), else NVIDIA's wheels
    (pkb's cuda extra) found by this interpreter's import path (or below `site_dirs`): the system toolkit wins
    so that a machine's own toolkit keeps giving the PTX it gave before the extra was installed."""
    pinned = os.environ.get("PKB_NVCC")
    if pinned and os.access(pinned, os.X_OK):
        return pinned
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), *system_homes):
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            return os.path.join(home, "bin", "nvcc")
    return wheel_nvcc(site_dirs)


def wheel_nvcc(site_dirs: list[str] | None = None) -> str | None:
    """nvcc of the nvidia-cuda-nvcc wheel: in each folder of the `nvidia` namespace package that this
    interpreter imports (a venv, the user's site folder, PYTHONPATH), or below `site_dirs` when given. The
    wheel's nvcc.profile finds its nvvm, headers and CCCL relative to itself: nothing to configure."""
    folders = nvidia_wheel_folders() if site_dirs is None else [os.path.join(d, "nvidia") for d in site_dirs]
    for folder in folders:
        nvcc = os.path.join(folder, *WHEEL_NVCC)
        if os.access(nvcc, os.X_OK):
            return nvcc
    return None


@functools.cache
def nvcc_version(nvcc: str) -> str:
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout.strip()


def compile_to_ptx(source: str, name: str = "kernel.cu", flags: tuple[str, ...] = ()) -> str:
    """PTX text for `source` (compiled as file `name`, which the line map reports)."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise CannotSimulate(NVCC_MISSING)  # pkb's limit here, not the source's fault
    all_flags = BASE_FLAGS + TORCH_FLAGS + tuple(flags)
    key = hashlib.sha256("\0".join((nvcc_version(nvcc), name, *all_flags, source)).encode()).hexdigest()
    path = os.path.join(cache_dir(), key[:32] + ".ptx")
    if os.path.exists(path):
        with open(path) as fh:
            return fh.read()
    with tempfile.TemporaryDirectory(prefix="pkb-ptx-") as tmp:
        src = os.path.join(tmp, os.path.basename(name))
        with open(src, "w") as fh:
            fh.write(source)
        out = os.path.join(tmp, "out.ptx")
        proc = subprocess.run([nvcc, *all_flags, "-o", out, src], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip())
            raise CompileError(f"nvcc failed on {name}: {first.replace(tmp + '/', '')}")
        with open(out) as fh:
            ptx = fh.read()
    ptx = ptx.replace(src, name)  # the line map names the caller's file, not our temp copy
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        fd, tmp_path = tempfile.mkstemp(dir=cache_dir(), suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(ptx)
        os.replace(tmp_path, path)
    except OSError:
        pass  # a cache read-only to this process (a candidate's with no cache of its own): compiled, not kept
    return ptx
