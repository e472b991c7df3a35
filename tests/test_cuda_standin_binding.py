"""pkb's stand-in CUDA runtime wins over a real libcudart already in the process (issue 40: a CUDA build of
torch loads its own libcudart into the global scope at `import torch`). Shown here on the CPU build with an
impostor: a `libcudart.so.13` whose cudaGetDevice answers 77, loaded globally before pkb's stand-ins. The
stand-in libc10_cuda's `c10::cuda::current_device()` and an extension-like library linked against the stand-in
runtime must both reach the stand-in (which answers the thread's device, 3); the twin, the same libraries
loaded without their own scope first (plain RTLD_GLOBAL / RTLD_NOW, as before), reaches the impostor (under a
CUDA build of torch, its real libcudart, already ahead of the impostor)."""
import os
import subprocess
import sys

import pytest

from pkbsim.cuda.toolchain import unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

PROBE = r'''
import ctypes, os, subprocess, sys
work = sys.argv[2]
def so(name, src, *flags):
    c = os.path.join(work, name + ".c")
    with open(c, "w") as f:
        f.write(src)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", os.path.join(work, name), f"-Wl,-soname,{name}", c, *flags],
                   check=True)
    return os.path.join(work, name)
import torch
# the impostor, global before anything of pkb's, as torch's CUDA build loads its libcudart (under a CUDA build
# the real one is already ahead of it)
ctypes.CDLL(so("libcudart.so.13", "int cudaGetDevice(int* d) { *d = 77; return 0; }\n"
               "int cudaSetDevice(int d) { return 0; }\n"), mode=ctypes.RTLD_GLOBAL)
from pkbsim.cuda import runtime_libs
if sys.argv[1] == "twin":
    runtime_libs.DLOPEN_MODE, runtime_libs.EXTENSION_MODE = os.RTLD_NOW | os.RTLD_GLOBAL, os.RTLD_NOW
rt = runtime_libs.load()
rt.cudaSetDevice(3)
current = rt.c10._ZN3c104cuda14current_deviceEv
current.restype = ctypes.c_int8
d = runtime_libs.runtime_dir()
ext = so("ext.so", "int cudaGetDevice(int*);\nint probe(void) { int d = -1; cudaGetDevice(&d); return d; }\n",
         f"-L{d}", f"-l:{runtime_libs.NAMES[0]}", f"-Wl,-rpath,{d}")
print(current(), ctypes.CDLL(ext, mode=runtime_libs.EXTENSION_MODE).probe())
'''


def _probe(mode: str, tmp_path) -> str:
    proc = subprocess.run([sys.executable, "-c", PROBE, mode, str(tmp_path)], capture_output=True, text=True,
                          timeout=600, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_the_stand_ins_win_over_a_real_libcudart_loaded_before_them(tmp_path):
    assert _probe("pkb", tmp_path) == "3 3"


def test_the_twin_without_their_own_scope_first_reaches_the_real_one(tmp_path):
    import torch
    answers = _probe("twin", tmp_path).split()
    assert answers == ["77", "77"] if not torch.version.cuda else "3" not in answers  # a CUDA build's own runtime
