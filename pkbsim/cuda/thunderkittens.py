"""ThunderKittens (ParallelKittens) extensions on simulated ranks: where the headers are, and the copy of
them pkb compiles against.

ThunderKittens is a header library that pkb does not ship. A candidate names it on its include path
(`$THUNDERKITTENS_ROOT/include`, `/prototype`); when that path does not hold `kittens.cuh`, the checkout
named by PKB_THUNDERKITTENS_ROOT (else THUNDERKITTENS_ROOT) is used; without one the build stops with a
limit of this installation that says which variable to set.

pkb compiles against a copy of the checkout's `include/` and `prototype/` (cached by content) in which:
- `pyutils/parallel_tensor.cuh` is pkb's own (runtime/thunderkittens/parallel_tensor.cuh): the same
  TKParallelTensor class, allocated on the simulated symmetric memory (pkbsim/cuda/tk_parallel.py) instead
  of the driver's VMM calls and the KittensBroker's shared memory, sockets and spin barriers, which cannot
  work when the ranks are threads of one process that share one loaded module;
- the other `pyutils/` headers get the rewrites a candidate's own text gets (rewrite.py), plus
  `x.device().index()` as the GPU the simulator says the tensor is on, so their device checks accept the CPU tensors that stand for
  the rank's GPU memory;
- `common/util.cuh`'s error checks (CUDACHECK, CUCHECK, CHECK_CUDA_ERROR) throw instead of ending the
  process: a launch the simulator stopped (a deadlock, a race, a memory fault) fails with an error code,
  and its report is what the screen gives, which a process that exits takes with it.
Everything else is ThunderKittens' own text, unchanged.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile

from pkbsim.cuda import rewrite
from pkbsim.cuda.toolchain import RUNTIME_SRC, file_lock, publish
from pkbsim.ptx.compile import cache_root

HEADER = "kittens.cuh"
ENV = ("PKB_THUNDERKITTENS_ROOT", "THUNDERKITTENS_ROOT")
NOT_FOUND = ("ThunderKittens not found (kittens.cuh is on none of the extension's include paths): set "
             "PKB_THUNDERKITTENS_ROOT to a ThunderKittens checkout (git clone https://github.com/HazyResearch/ThunderKittens)")
OWN_PARALLEL_TENSOR = os.path.join(RUNTIME_SRC, "thunderkittens", "parallel_tensor.cuh")
_USES = re.compile(r'#\s*include\s*[<"](?:[\w./]*/)?(kittens\.cuh|pyutils/torchutils\.cuh)[>"]')
_DEVICE_INDEX = re.compile(r"\b([A-Za-z_][\w.]*(?:\(\))?)\s*\.\s*device\s*\(\s*\)\s*\.\s*index\s*\(\s*\)")


def uses_thunderkittens(tu: str) -> bool:
    return _USES.search(tu) is not None


def find_root(include_paths: list[str]) -> str | None:
    """The ThunderKittens checkout: the parent of the first include path holding kittens.cuh, else the
    one an environment variable names."""
    for p in include_paths:
        if os.path.isfile(os.path.join(p, HEADER)):
            return os.path.dirname(os.path.abspath(p))
    for var in ENV:
        root = os.environ.get(var)
        if root and os.path.isfile(os.path.join(root, "include", HEADER)):
            return os.path.abspath(root)
    return None


def rewrite_header(text: str) -> str:
    """A ThunderKittens host header made to accept the CPU tensors that stand for a rank's GPU memory."""
    return _DEVICE_INDEX.sub(r"::pkb_tk_device_index(\1)", rewrite.rewrite(text))


def _digest(root: str) -> str:
    h = hashlib.sha256()
    with open(OWN_PARALLEL_TENSOR, "rb") as f:
        h.update(f.read())
    h.update(rewrite_header("probe x.device().index() x.is_cuda()").encode())
    h.update(rewrite_util("exit(EXIT_FAILURE);").encode())
    for sub in ("include", "prototype"):
        base = os.path.join(root, sub)
        for dirpath, dirs, files in os.walk(base):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                h.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:16]


def overlay(root: str) -> list[str]:
    """Include paths (include/, prototype/) of pkb's copy of the checkout at `root`, made once per content."""
    out = os.path.join(cache_root(), "thunderkittens", _digest(root))
    if not os.path.isdir(out):
        with file_lock(out + ".lock"):
            if not os.path.isdir(out):
                os.makedirs(os.path.dirname(out), exist_ok=True)
                tmp = tempfile.mkdtemp(prefix=".tk-", dir=os.path.dirname(out))
                try:
                    _make(root, tmp)
                    publish(tmp, out)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
    return [os.path.join(out, "include"), os.path.join(out, "prototype")]


_EXIT = re.compile(r"\b(?:std::)?exit\(EXIT_FAILURE\);")


def rewrite_util(text: str) -> str:
    """ThunderKittens' host error checks, throwing a C++ exception (Python's RuntimeError) for exit()."""
    return "#include <stdexcept>\n" + _EXIT.sub(
        'throw std::runtime_error("CUDA error (the simulator\'s report says why)");', text)


def _make(root: str, dst: str) -> None:
    for sub in ("include", "prototype"):
        src = os.path.join(root, sub)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dst, sub), symlinks=False)
        else:
            os.makedirs(os.path.join(dst, sub))
    util = os.path.join(dst, "include", "common", "util.cuh")
    if os.path.isfile(util):
        with open(util) as f:
            text = f.read()
        with open(util, "w") as f:
            f.write(rewrite_util(text))
    pyutils = os.path.join(dst, "include", "pyutils")
    if not os.path.isdir(pyutils):
        return
    for name in os.listdir(pyutils):
        path = os.path.join(pyutils, name)
        if name == "parallel_tensor.cuh":
            shutil.copyfile(OWN_PARALLEL_TENSOR, path)
        elif name.endswith((".cuh", ".h", ".hpp")):
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(rewrite_header(text))


def include_paths(tu: str, given: list[str]) -> list[str] | None:
    """The include paths for `tu`: pkb's copy of ThunderKittens first when the unit uses it (None: it
    does and no checkout is found), else `given` unchanged."""
    if not uses_thunderkittens(tu):
        return given
    root = find_root(given)
    if root is None:
        return None
    return [*overlay(root), *given]
