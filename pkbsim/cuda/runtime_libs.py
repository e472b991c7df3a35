"""The stand-in CUDA libraries (runtime/*.cpp): built with g++ on first use (once, under a file lock),
cached, loaded globally.

`libpkb_cudart.so` (libcudart's part: the launch path and the runtime calls wrappers make),
`libpkb_c10_cuda.so` (libc10_cuda's: c10::cuda and at::cuda symbols, the CPU-allocation tracker) and an empty
`libpkb_torch_cuda.so`. Every other symbol the real libcudart exports becomes a weak stub that fails with
cudaErrorNotSupported, so no extension misses a runtime symbol at load time. The cache key covers the sources,
torch and the toolkit.

The names are pkb's own and the stand-ins and extensions are loaded with RTLD_DEEPBIND, so that they win over a
real libcudart/libc10_cuda already in the process: a CUDA build of torch loads its own (libcudart globally, at
`import torch`), and under the real names the loader would hand an extension those (a library already loaded
answers for its soname), or resolve its calls to them first (global scope before the library's own).
"""
from __future__ import annotations

import ctypes
import errno
import glob
import hashlib
import os
import subprocess
import tempfile
import threading

import torch

from pkbsim.cuda.toolchain import (
    RUNTIME_SRC,
    cuda_home,
    file_lock,
    publish,
    require_nvcc,
    torch_dirs,
)
from pkbsim.errors import CannotSimulate
from pkbsim.ptx.compile import nvcc_version, trusted_cache_root

NAMES = ("libpkb_cudart.so", "libpkb_c10_cuda.so", "libpkb_torch_cuda.so")
# own scope first (os.RTLD_DEEPBIND): an extension's and a stand-in's CUDA symbols resolve to the stand-ins even
# where torch's CUDA build has loaded the real libraries into the global scope before them
DLOPEN_MODE = os.RTLD_NOW | os.RTLD_GLOBAL | os.RTLD_DEEPBIND   # the stand-ins (global: extensions link them)
EXTENSION_MODE = os.RTLD_NOW | os.RTLD_DEEPBIND                  # an extension (local: two may share a name)
_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None


def _sources() -> list[str]:
    return sorted(glob.glob(os.path.join(RUNTIME_SRC, "*.c*")) + glob.glob(os.path.join(RUNTIME_SRC, "include", "*.h")))


def runtime_dir() -> str:
    """The folder holding the built stand-in libraries (built now if missing)."""
    nvcc = require_nvcc()
    h = hashlib.sha256("\0".join((torch.__version__, nvcc_version(nvcc), *NAMES)).encode())
    for path in [*_sources(), os.path.abspath(__file__)]:   # this file too: it says how they are linked
        with open(path, "rb") as f:
            h.update(f.read())
    out = os.path.join(trusted_cache_root(), "cuda-rt", h.hexdigest()[:20])
    if not _built(out):
        try:
            with file_lock(out + ".lock"):  # once, not once per rank or worker that needs it at the same time
                if not _built(out):
                    _build(out, cuda_home(nvcc))
        except OSError as e:
            if e.errno != errno.EROFS:
                raise
            # a screened candidate's process sees pkb's builds read-only: the screen builds the runtime before it
            # starts, for files that build (prebuild.builds_extensions); one that reaches it another way meets
            # pkb's limit
            raise CannotSimulate("pkb's CUDA runtime stand-in was not built before the candidate's process started "
                                 "(its extension is built from code the screen did not see build)") from None
    return out


def _built(out: str) -> bool:
    return all(os.path.exists(os.path.join(out, n)) for n in NAMES)


def real_cudart_exports(home: str) -> list[str]:
    """The functions the toolkit's libcudart exports ([] where it has none)."""
    real = sorted(glob.glob(os.path.join(home, "lib64", "libcudart.so.*"))
                  or glob.glob(os.path.join(home, "lib", "libcudart.so.*")))  # NVIDIA's wheels have lib/ alone
    if not real:
        return []
    out = subprocess.run(["nm", "-D", "--defined-only", real[0]], capture_output=True, text=True, check=False).stdout
    return sorted({ln.split()[-1].split("@")[0] for ln in out.splitlines()
                   if len(ln.split()) == 3 and ln.split()[1] == "T"})


def export_maps(names: list[str]) -> tuple[str, str]:
    """Linker version scripts of the two stand-ins: what the real libraries export, no more, no less. The runtime
    exports libcudart's functions (`names`, else every cuda* name), the c10 one c10::cuda and at::cuda; both
    export pkb's own `sim_*` calls too. Everything else (the C++ library's templates they instantiate) stays
    local: exported from a library loaded globally, it would answer for other libraries' copies."""
    functions = "".join(f"{n}; " for n in names) or "cuda*; __cuda*; "
    return (f"{{ global: {functions}sim_*; local: *; }};\n",
            '{ global: extern "C++" { c10::cuda::*; at::cuda::*; }; sim_*; local: *; };\n')


def _weak_stubs(home: str) -> str:
    """C source defining every export of the real libcudart as a weak 'not supported' function."""
    names = real_cudart_exports(home)
    body = "\n".join(f'__attribute__((weak)) int {n}(void) {{ return pkb_unsupported("{n}"); }}' for n in names)
    return ('#include <stdio.h>\nvoid sim_note_unsupported(const char*);\nstatic int pkb_unsupported(const char* n) {\n'
            '  fprintf(stderr, "[pkb cudart] not simulated: %s\\n", n);\n  sim_note_unsupported(n);\n  return 801;\n}\n'
            + body + "\n")


def _build(out: str, home: str) -> None:
    incs, lib = torch_dirs()
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".build-", dir=os.path.dirname(out))
    cuda_inc = os.path.join(home, "include")
    stub_inc = os.path.join(RUNTIME_SRC, "include")
    weak = os.path.join(tmp, "weak.c")
    with open(weak, "w") as f:
        f.write(_weak_stubs(home))
    maps = [os.path.join(tmp, f"{n}.map") for n in NAMES[:2]]
    for path, text in zip(maps, export_maps(real_cudart_exports(home))):
        with open(path, "w") as f:
            f.write(text)
    common = ["-O1", "-fPIC", "-shared", f"-I{cuda_inc}"]
    steps = [
        ["g++", *common, "-o", os.path.join(tmp, NAMES[0]), f"-Wl,-soname,{NAMES[0]}", f"-Wl,--version-script={maps[0]}",
         "-x", "c++", "-std=c++17", os.path.join(RUNTIME_SRC, "fakecudart.cpp"), "-x", "c", weak, "-ldl"],
        ["g++", *common, "-std=c++17", "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE", "-DNDEBUG", f"-I{stub_inc}", *(f"-I{i}" for i in incs),
         "-o", os.path.join(tmp, NAMES[1]), f"-Wl,-soname,{NAMES[1]}", f"-Wl,--version-script={maps[1]}",
         os.path.join(RUNTIME_SRC, "c10cuda.cpp"),
         f"-L{tmp}", f"-l:{NAMES[0]}", f"-L{lib}", "-lc10", f"-Wl,-rpath,{out}", f"-Wl,-rpath,{lib}"],
        ["gcc", "-shared", "-fPIC", "-o", os.path.join(tmp, NAMES[2]), f"-Wl,-soname,{NAMES[2]}",
         os.path.join(RUNTIME_SRC, "empty.c")],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"building pkb's CUDA runtime stand-in failed: {proc.stderr.strip()[-2000:]}")
    publish(tmp, out)


def load() -> ctypes.CDLL:
    """Load the stand-ins process-wide (RTLD_GLOBAL, before any extension) and return the runtime."""
    global _loaded
    with _lock:
        if _loaded is None:
            d = runtime_dir()
            rt = ctypes.CDLL(os.path.join(d, NAMES[0]), mode=DLOPEN_MODE)
            c10 = ctypes.CDLL(os.path.join(d, NAMES[1]), mode=DLOPEN_MODE)
            ctypes.CDLL(os.path.join(d, NAMES[2]), mode=DLOPEN_MODE)
            c10.sim_track_cpu_allocations()
            c10.sim_find_allocation.argtypes = [ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64),
                                                ctypes.POINTER(ctypes.c_size_t)]
            rt.sim_module_fatbin.restype = ctypes.c_void_p
            rt.sim_module_path.restype = ctypes.c_char_p
            rt.sim_take_unsupported.restype = ctypes.c_char_p
            rt.sim_max_dynamic_smem.argtypes = [ctypes.c_void_p]
            rt.c10 = c10
            _loaded = rt
    return _loaded


def find_allocation(addr: int) -> tuple[int, int] | None:
    """(base, size) of the live CPU allocation holding `addr`, if it was made after load()."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    if load().c10.sim_find_allocation(addr, ctypes.byref(base), ctypes.byref(size)):
        return base.value, size.value
    return None
