"""Where the tools and headers are for building extensions: the CUDA home, torch's include and library
folders; publishing a finished build into the cache (nvcc itself and the cache root: pkbsim.ptx.compile)."""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import sysconfig

import torch

from candidate_sandbox import nvidia_wheel_folders
from pkbsim.ptx.compile import NVCC_MISSING, find_nvcc, nvcc_version

RUNTIME_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime")


def cuda_home(nvcc: str) -> str:
    """The toolkit folder holding include/cuda_runtime_api.h ($CUDA_HOME, nvcc's parent, /usr/local/cuda)."""
    for home in (os.environ.get("CUDA_HOME"), os.path.dirname(os.path.dirname(os.path.realpath(nvcc))),
                 "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "include", "cuda_runtime_api.h")):
            return home
    raise FileNotFoundError(f"no CUDA headers next to {nvcc}: set CUDA_HOME to the toolkit folder")


# the math libraries' headers LLM kernels include, which a system toolkit may lack and NVIDIA's wheels (pkb's
# cuda extra) carry: cuBLAS (host calls) and cuRAND (device-side generators, header-only code a kernel inlines)
LIBRARY_HEADERS = ("cublas_v2.h", "curand_kernel.h")


def wheel_include(nvcc: str, wheel_folders: list[str] | None = None) -> str | None:
    """The include folder of NVIDIA's wheels (pkb's cuda extra: nvidia/cu13/include in each of `wheel_folders`,
    by default the `nvidia` namespace package's folders) where the toolkit in use lacks one of `LIBRARY_HEADERS`
    and the wheel has it (a system toolkit without cuBLAS or cuRAND, as this machine's); None otherwise. Only for
    an nvcc of the wheels' CUDA major version (13)."""
    home = os.path.join(cuda_home(nvcc), "include")
    lacking = [h for h in LIBRARY_HEADERS if not os.path.exists(os.path.join(home, h))]
    if not lacking or "release 13." not in nvcc_version(nvcc):
        return None
    for folder in nvidia_wheel_folders() if wheel_folders is None else wheel_folders:
        inc = os.path.join(folder, "cu13", "include")
        if any(os.path.exists(os.path.join(inc, h)) for h in lacking):
            return inc
    return None


def wheel_headers(nvcc: str, wheel_folders: list[str] | None = None) -> list[str]:
    """`-isystem` of `wheel_include`: searched after the toolkit's own folder, so only headers the toolkit lacks
    come from the wheel; pkb's stand-in cublas_v2.h then gives way to the real one (`#include_next`)."""
    inc = wheel_include(nvcc, wheel_folders)
    return ["-isystem", inc] if inc else []


def has_real_cublas(nvcc: str) -> bool:
    """Whether builds see NVIDIA's cublas_v2.h (the toolkit's or the wheel's), not only pkb's stand-in of its types."""
    inc = wheel_include(nvcc)
    return any(os.path.exists(os.path.join(folder, "cublas_v2.h"))
               for folder in (os.path.join(cuda_home(nvcc), "include"), inc) if folder)


def torch_dirs() -> tuple[list[str], str]:
    root = os.path.dirname(torch.__file__)
    inc = os.path.join(root, "include")
    return [inc, os.path.join(inc, "torch", "csrc", "api", "include")], os.path.join(root, "lib")


def python_include() -> str:
    return sysconfig.get_paths()["include"]


@contextlib.contextmanager
def file_lock(path: str):
    """Hold an exclusive lock on `path` (created if needed): one build of a cache entry at a time, across the
    threads (simulated ranks) and processes (batch workers) that want it at once."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def publish(tmp: str, out: str) -> None:
    """Move a finished build folder into the cache in one step; if another process got there first, keep
    theirs (same content key)."""
    try:
        os.rename(tmp, out)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


_MISSING_HEADER = re.compile(r'cannot open source file "([^"]+)"|fatal error: ([^:\s]+): No such file')


_TORCH_PREFIXES = ("ATen/", "c10/", "torch/", "caffe2/")
_CUDA_ONLY = re.compile(r"cuda|cudnn|hip|miopen|nccl|cub/|mps|xpu", re.I)


def missing_header(log: str) -> str | None:
    """'missing header X' when a compiler log says an #include is not installed here (a third-party library
    such as ThunderKittens): a limit of this installation, not the candidate's fault. A header named under
    torch's own folders that no build of torch has (not a CUDA-only one, which this CPU build lacks) is the
    candidate's error, as nvcc reports it on a GPU machine: None, so the build error names its line."""
    m = _MISSING_HEADER.search(log)
    if not m:
        return None
    header = m.group(1) or m.group(2)
    if not_in_any_torch(header):
        return None
    fix = ": pip install 'pkb[cuda]' (NVIDIA's headers)" if os.path.basename(header) in LIBRARY_HEADERS else ""
    return f"missing header {header} (not installed here{fix})"


def not_in_any_torch(header: str) -> bool:
    """A torch header (ATen/, c10/, torch/) absent here that is not CUDA-specific: the CUDA build lacks it too."""
    return (header.startswith(_TORCH_PREFIXES) and not _CUDA_ONLY.search(header)
            and not any(os.path.exists(os.path.join(d, header)) for d in torch_dirs()[0]))


NO_NVCC = f"inline CUDA is compiled to PTX to be simulated; {NVCC_MISSING}"


def unavailable() -> str | None:
    """Why inline-CUDA extensions cannot run on simulated ranks in this process (None: they can). Either build of
    torch will do: under a CUDA build the stand-ins are bound ahead of its own CUDA libraries (runtime_libs)."""
    if find_nvcc() is None:
        return NO_NVCC
    return None


def require_nvcc() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise FileNotFoundError(NVCC_MISSING)
    return nvcc
