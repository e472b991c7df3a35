"""pkb's stand-in for the CUDA driver calls that build TMA tensor maps (runtime/driver/tensor_map.cpp):
cuTensorMapEncodeTiled, cuTensorMapReplaceAddress, cuGetErrorString and cuGetErrorName.

An extension that needs one of them (an undefined symbol at link time, build.py) gets this object linked
in instead of a "not supported" stub; ThunderKittens' host code (tma::detail::create_tensor_map) and a
candidate's own cuTensorMapEncodeTiled call both land here. The object is built once per content (g++ with
the toolkit's cuda.h) and cached; a shared-library copy serves tests through ctypes. Only extensions that
can call these functions (their text names one, or they use ThunderKittens) carry the object's digest in
their build key, so other extensions' cached builds stay valid.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile

from pkbsim.cuda.toolchain import RUNTIME_SRC, cuda_home, file_lock, publish, require_nvcc
from pkbsim.ptx.compile import trusted_cache_root

SOURCE = os.path.join(RUNTIME_SRC, "driver", "tensor_map.cpp")
SYMBOLS = frozenset({"cuTensorMapEncodeTiled", "cuTensorMapReplaceAddress", "cuGetErrorString", "cuGetErrorName"})
_NAMES = re.compile(r"\b(" + "|".join(sorted(SYMBOLS)) + r")\b")


def digest() -> str:
    with open(SOURCE, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def wanted(tu: str, thunderkittens: bool = False) -> bool:
    """Can this translation unit call one of the stand-in's functions?"""
    return thunderkittens or _NAMES.search(tu) is not None


def build_dir() -> str:
    """The folder holding tensor_map.o (for linking) and libpkbdriver.so (for ctypes), built now if missing."""
    home = cuda_home(require_nvcc())
    out = os.path.join(trusted_cache_root(), "cuda-driver", digest())
    if not os.path.exists(os.path.join(out, "libpkbdriver.so")):
        with file_lock(out + ".lock"):
            if not os.path.exists(os.path.join(out, "libpkbdriver.so")):
                os.makedirs(os.path.dirname(out), exist_ok=True)
                tmp = tempfile.mkdtemp(prefix=".build-", dir=os.path.dirname(out))
                inc = f"-I{os.path.join(home, 'include')}"
                for cmd in (["g++", "-O1", "-fPIC", "-std=c++17", inc, "-c", SOURCE, "-o", os.path.join(tmp, "tensor_map.o")],
                            ["g++", "-shared", "-o", os.path.join(tmp, "libpkbdriver.so"), os.path.join(tmp, "tensor_map.o")]):
                    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                    if proc.returncode != 0:
                        raise RuntimeError(f"building pkb's driver stand-in failed: {proc.stderr.strip()[-2000:]}")
                publish(tmp, out)
    return out


def object_path() -> str:
    return os.path.join(build_dir(), "tensor_map.o")


def library_path() -> str:
    return os.path.join(build_dir(), "libpkbdriver.so")
