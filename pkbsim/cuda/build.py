"""The `load_inline` replacement: one translation unit, nvcc for host x86 code plus PTX, g++ to link
against torch's CPU libraries and pkb's CUDA stand-ins, cached by content hash.

The TU is the candidate's CUDA sources, then its C++ sources, then the generated PYBIND11_MODULE, each
source behind a `#line` into the candidate's file (rewrite.py), after runtime/prelude.h (kept out of the device
pass where the kernels allow it: device_pass.py).
Device code becomes PTX only (`code=compute_90a`, uncompressed, with line info), which the launch path
reads back from the loaded module. Undefined symbols that no library provides (driver API calls, CUDA
parts of torch) get generated stubs that raise when called, so the module always loads.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

import torch

from pkbsim.cuda import device_pass, driver, host_header, rewrite, thunderkittens, two_units
from pkbsim.cuda.host_header import PRELUDE
from pkbsim.cuda.runtime_libs import NAMES, runtime_dir
from pkbsim.cuda.toolchain import (
    RUNTIME_SRC,
    wheel_headers,
    cuda_home,
    file_lock,
    has_real_cublas,
    missing_header,
    publish,
    python_include,
    require_nvcc,
    torch_dirs,
)
from pkbsim.errors import CompileError, SimulatorLimit
from pkbsim.ptx.compile import EXTENSION_CACHE, cache_root, nvcc_version, trusted_cache_root

HOST_FLAG = re.compile(r"^(-D|-U|-I|-std=)")   # what of a candidate's nvcc flags g++ sees in a host unit
KEPT_FLAG = re.compile(r"^(-D|-U|-I|-O\d?$|--use_fast_math$|-use_fast_math$|--expt-|-std=)")
ERROR = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?:catastrophic )?error:?\s*(?P<msg>.*)$")
GCC_ERROR = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.*)$")


class ExtensionBuildError(CompileError):
    """The candidate's extension does not compile; `site` is 'file.py:line' where known."""

    def __init__(self, message: str, site: str = ""):
        super().__init__(message)
        self.site = site


class MissingHeader(SimulatorLimit):
    """The extension includes a header that is not installed here: a limit of this installation, not a
    compile error of the candidate."""


def nvcc_flags(name: str, slim: bool, extra: list[str], include_paths: list[str]) -> list[str]:
    incs, _ = torch_dirs()
    nvcc = require_nvcc()
    compress = "--compress-mode=none" if "release 13" in nvcc_version(nvcc) else "-Xfatbin=-compress=false"
    shadow = [f"-I{os.path.join(RUNTIME_SRC, 'slim')}"] if slim else []
    return [f"-DTORCH_EXTENSION_NAME={name}", *host_header.TORCH_MACROS, *wheel_headers(nvcc),   # -isystem: after every -I
            *shadow, *(f"-I{i}" for i in incs), f"-I{python_include()}", f"-I{os.path.join(RUNTIME_SRC, 'include')}",
            *(f"-I{p}" for p in include_paths), "-std=c++17", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr",
            *host_header.HALF_MACROS, "-diag-suppress", "3189,3306", "-gencode", "arch=compute_90a,code=compute_90a",
            compress, "-lineinfo", "-include", PRELUDE,
            *(f for f in extra if KEPT_FLAG.match(f))]


def build(name: str, tu: str, extra_cuda_cflags: list[str], include_paths: list[str], origin: str,
          building=contextlib.nullcontext) -> tuple[str, str]:
    """(path of the built `.so`, its module name) for translation unit `tu`, from the cache when it was
    built before; a real build (or the wait for one) runs inside the `building()` context. The module name is `name` plus a
    hash of the source: Python keeps one module per name, and two programs may both say "my_ext"."""
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ExtensionBuildError(f"extension name {name!r} is not a valid Python identifier")
    slim = not rewrite.FULL_TORCH.search(tu)
    name = f"{name}_{hashlib.sha256(tu.encode()).hexdigest()[:12]}"
    include_paths = thunderkittens.include_paths(tu, list(include_paths))
    if include_paths is None:
        raise MissingHeader(thunderkittens.NOT_FOUND)
    flags = nvcc_flags(name, slim, list(extra_cuda_cflags), list(include_paths))
    nvcc = require_nvcc()
    with open(PRELUDE) as f:
        prelude = f.read()
    with building():  # waiting for another rank's (or process's) build is building time too
        rt = runtime_dir()
        cut = _split(tu) or ""  # what nvcc compiles: a change of the cut is a new build
        parts = [tu, cut, *_portable(flags), prelude, torch.__version__, nvcc_version(nvcc), rt, host_header.identity(),
                 LINK_RULES]
        if driver.wanted(tu, thunderkittens.uses_thunderkittens(tu)):
            parts.append(driver.digest())  # the tensor-map stand-in it may link (others' keys unchanged)
        key = hashlib.sha256("\0".join(parts).encode())
        entry = f"{name}_{key.hexdigest()[:8]}"
        out_dir = os.path.join(trusted_cache_root(), "cuda-ext", entry)   # the machine's (read-only in a sandbox)
        so = os.path.join(out_dir, f"{name}.so")
        _raise_stored(out_dir)
        if not os.path.exists(so) and os.environ.get(EXTENSION_CACHE):   # else the candidate's own, kept
            out_dir = os.path.join(os.environ[EXTENSION_CACHE], entry)
            so = os.path.join(out_dir, f"{name}.so")
        if not os.path.exists(so):
            with file_lock(out_dir + ".lock"):
                _raise_stored(out_dir)
                if not os.path.exists(so):
                    host = [*host_header.base_flags(slim), *(f"-I{p}" for p in include_paths),
                            *(f for f in extra_cuda_cflags if HOST_FLAG.match(f))]
                    try:
                        _compile(name, tu, flags, nvcc, rt, out_dir, origin, (host, slim))
                    except ExtensionBuildError as e:
                        _store(out_dir, e)
                        raise
    return so, name


def _portable(flags: list[str]) -> list[str]:
    """The flags as the cache key reads them: the cache's own folder as a name, not as its path. A candidate's
    process sees its build cache at a folder of its own working directory (confinement.py), a new path in each
    process, and pkb's copy of ThunderKittens lives in that cache: its include paths made a new key in each of a
    screen's processes (the functional stage's, the sizes stage's), which built a ParallelKittens unit again,
    60-230 s each time. The copy's folder is named by its content, so the name is enough."""
    root = cache_root()
    return [f.replace(root, "$PKB_CACHE_DIR") for f in flags]


def _store(out_dir: str, error: ExtensionBuildError) -> None:
    """Keep a compile error beside where its build would be: the same unit fails the same way next time, so a
    re-screen (a refine step, a resumed batch) is not charged the failed builds again (a minute here). Where
    the folder is read-only, nothing is kept."""
    try:
        with open(out_dir + ".failed.tmp", "w") as f:
            json.dump({"message": str(error), "site": error.site}, f)
        os.replace(out_dir + ".failed.tmp", out_dir + ".failed")
    except OSError:
        pass


def _raise_stored(out_dir: str) -> None:
    """Raise the compile error kept for this build, if there is one."""
    try:
        with open(out_dir + ".failed") as f:
            kept = json.load(f)
    except (OSError, ValueError):
        return
    raise ExtensionBuildError(str(kept.get("message", "")), str(kept.get("site", "")))


def _compile(name: str, tu: str, flags: list[str], nvcc: str, rt: str, out_dir: str, origin: str,
             host: tuple[list[str], bool]) -> None:
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=os.path.dirname(out_dir))
    try:
        objs = _objects(name, tu, flags, nvcc, tmp, origin, host)
        error = _link(name, objs, rt, tmp)
        if error and len(objs) > 1:   # two units that do not link as one unit does (a variable defined in both)
            for o in objs:
                os.remove(o)
            objs = _objects(name, tu, flags, nvcc, tmp, origin, host, two=False)
            error = _link(name, objs, rt, tmp)
        if error:
            raise ExtensionBuildError(f"linking extension {name!r} failed: {error}")
        publish(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _link(name: str, objs: list[str], rt: str, tmp: str) -> str | None:
    """Link `objs` into tmp/name.so, with stubs for the symbols nothing provides; the linker's first error, if any."""
    _, torch_lib = torch_dirs()
    # the stand-ins by their own names, never torch's libc10_cuda/libtorch_cuda (a CUDA build has them: runtime_libs)
    link = ["g++", "-shared", "-o", os.path.join(tmp, f"{name}.so"), *objs, f"-L{rt}", *(f"-l:{n}" for n in NAMES),
            f"-L{torch_lib}", "-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python",
            f"-Wl,-rpath,{rt}", f"-Wl,-rpath,{torch_lib}"]
    missing = _undefined(link)
    if set(missing) & driver.SYMBOLS:  # TMA tensor maps and driver error names: pkb's stand-in
        link.insert(4 + len(objs), driver.object_path())
        missing = [n for n in missing if n not in driver.SYMBOLS]
    absent = absent_from_torch(missing)
    if absent:
        mangled, readable = absent[0]
        return (f"undefined symbol: {readable} ({mangled}): torch's libraries do not export it, so the extension "
                f"fails to load on a GPU too")
    if missing:
        stubs = os.path.join(tmp, "autostub.c")
        with open(stubs, "w") as f:
            f.write(autostub(missing))
        subprocess.run(["gcc", "-c", "-fPIC", "-fexceptions", stubs, "-o", stubs[:-1] + "o"], check=True)
        link.insert(4 + len(objs), stubs[:-1] + "o")
    proc = subprocess.run(link, capture_output=True, text=True, check=False)
    return _first_error(proc.stderr) if proc.returncode != 0 else None


def _objects(name: str, tu: str, flags: list[str], nvcc: str, tmp: str, origin: str,
             host: tuple[list[str], bool], two: bool = True) -> list[str]:
    """The objects for `tu`: its kernel and host units built apart where two_units allows it (nvcc and g++
    at once), else nvcc's object of the whole unit with torch's headers kept out of the device pass where
    that applies (device_pass.py), else of the whole unit in both passes. A failure of a faster way falls
    through to the next, so that an error is the one nvcc reports for the whole unit."""
    env = dict(os.environ, CUDA_HOME=cuda_home(nvcc))
    split = _split(tu)
    units = None if not two or thunderkittens.uses_thunderkittens(tu) else two_units.split(tu, name)
    if units is not None:
        objs, kernels_built = _two_units(name, units, flags, nvcc, tmp, env, host)
        if objs:
            return objs
        split = split if kernels_built else None   # the cut itself fails in nvcc: only the whole unit is left
    src, obj = os.path.join(tmp, f"{name}.cu"), os.path.join(tmp, f"{name}.o")
    attempts = [(split, [f for f in flags if f not in ("-include", PRELUDE)])] if split else []
    for text, fl in [*attempts, (tu, flags)]:
        with open(src, "w") as f:
            f.write(text)
        proc = subprocess.run([nvcc, "-c", src, "-o", obj, *fl], capture_output=True, text=True, env=env, check=False)
        if proc.returncode == 0:
            return [obj]
    raise _build_error(proc.stdout + proc.stderr, origin, "nvcc")


def _two_units(name: str, units: two_units.Units, flags: list[str], nvcc: str, tmp: str, env: dict,
               host: tuple[list[str], bool]) -> tuple[list[str], bool]:
    """(the kernel unit's and the host unit's objects, or [] if either failed; whether the kernel unit built)."""
    host_flags, slim = host
    host_src = os.path.join(tmp, f"{name}_host.cpp")
    kernel_src = os.path.join(tmp, f"{name}_kernels.cu") if units.kernel_unit is not None else None
    for path, text in ((kernel_src, units.kernel_unit), (host_src, units.host_unit)):
        if path:
            with open(path, "w") as f:
                f.write(text)
    objs = [p for p in (kernel_src and kernel_src[:-3] + ".o", host_src[:-4] + ".o") if p]
    kernel_flags = [f for f in flags if f not in ("-include", PRELUDE)]
    with contextlib.ExitStack() as stack:   # the two compilers at once
        kernel_proc = kernel_src and stack.enter_context(subprocess.Popen(
            [nvcc, "-c", kernel_src, "-o", objs[0], *kernel_flags], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
        for way in host_header.host_compilers(slim):   # clang++ with its instantiating header first, then g++
            host_rc = subprocess.run([*way.argv, "-c", host_src, "-o", objs[-1], *host_flags, *way.include,
                                      "-include", host_header.HOST_UNIT], capture_output=True, check=False).returncode
            if host_rc == 0:
                break
        kernel_rc = kernel_proc.wait() if kernel_proc else 0
    return (objs if kernel_rc == host_rc == 0 else []), kernel_rc == 0


def _split(tu: str) -> str | None:
    """device_pass.split, except for ThunderKittens units, whose kernels are templates that host calls
    (`kittens::py::launch_kernel`) instantiate: the cut would lose them."""
    return None if thunderkittens.uses_thunderkittens(tu) else device_pass.split(tu, PRELUDE)


def _undefined(link: list[str]) -> list[str]:
    """Symbols the object needs that none of the libraries on the link line define (Python's own
    symbols excepted: the interpreter provides them)."""
    proc = subprocess.run([*link, "-Wl,--no-undefined", "-Wl,--no-demangle"], capture_output=True, text=True, check=False)
    names = set(re.findall(r"undefined reference to `([^']+)'", proc.stderr))
    return sorted(n for n in names if not n.startswith(("Py", "_Py")))


# what a link makes of missing symbols: part of every build's key, so a build linked under other rules is not
# reused (2: torch's own CPU-side names are the candidate's undefined symbols, not stubs)
LINK_RULES = "link-rules-2"
# torch's own namespaces, by the mangled name's first component (_ZN, qualifiers, then <length><name>)
TORCH_NAMESPACE = re.compile(r"^_ZN[KVRO]*(?:2at|3c10|5torch|6caffe2)\d")
# what only a build of torch for GPUs, or NVIDIA's libraries, define: pkb's stand-ins' business, never the
# candidate's fault when this build of torch lacks it
CUDA_SIDE = re.compile(r"cuda|nccl|cublas|cudnn|curand|cufft|cusparse|cusolver|nvshmem|nvtx|nvrtc|flash", re.I)


def absent_from_torch(names: list[str]) -> list[tuple[str, str]]:
    """The missing symbols (mangled, demangled) that name torch's own CPU-side code: the CPU libraries of
    torch are the same code in either build, so what they do not export no build does (a template
    instantiation torch never made, `at::TensorBase::data_ptr<long long>`, is an undefined symbol at load on a
    GPU: the candidate's compile error there, not a limit of pkb). CUDA-side names are left to the stubs."""
    torch_side = [n for n in names if TORCH_NAMESPACE.match(n)]
    if not torch_side:
        return []
    readable = subprocess.run(["c++filt"], input="\n".join(torch_side), capture_output=True, text=True,
                              check=False).stdout.split("\n")
    return [(n, d) for n, d in zip(torch_side, readable) if not CUDA_SIDE.search(d)]


def autostub(names: list[str]) -> str:
    """C source defining each missing symbol as a function that raises 'unsupported CUDA/torch symbol'."""
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=False).stdout.split("\n")
    lines = ["void sim_missing_symbol(const char*);"]
    for i, (n, d) in enumerate(zip(names, demangled)):
        text = d.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'void pkb_stub_{i}(void) __asm__("{n}");\nvoid pkb_stub_{i}(void) {{ sim_missing_symbol("{text}"); }}')
    return "\n".join(lines) + "\n"


def _first_error(log: str) -> str:
    lines = [ln for ln in log.splitlines() if "error" in ln]
    return (lines[0] if lines else log.strip().splitlines()[-1] if log.strip() else "unknown error")[:500]


# a cuBLAS function pkb's stand-in cublas_v2.h (types only) does not declare: nvcc's and g++'s words for it
CUBLAS_UNDECLARED = re.compile(r'identifier "cublas\w*" is undefined|.cublas\w*. was not declared')
NO_CUBLAS = ("missing header cublas_v2.h (not installed here: pkb has only a stand-in of its types; "
             "`pip install 'pkb[cuda]'` installs NVIDIA's)")


INSTANTIATED = re.compile(r"detected during.* at line (?P<line>\d+) of (?P<file>\S+?)\s*$")


def _instantiated_at(rest: list[str], origin: str) -> str:
    """'file.py:line' of the candidate's line in the instantiation note that follows an error in a header
    ("detected during instantiation of ... at line N of <file>"), up to the next error."""
    for ln in rest:
        if ERROR.match(ln.strip()) or GCC_ERROR.match(ln.strip()):
            break
        m = INSTANTIATED.search(ln.strip())
        if m and os.path.abspath(m.group("file").strip('"')) == os.path.abspath(origin):
            return f"{os.path.basename(origin)}:{m.group('line')}"
    return ""


def _build_error(log: str, origin: str, tool: str) -> ExtensionBuildError | MissingHeader:
    """The first error, with its place in the candidate's file when the #line map gives one."""
    if missing := missing_header(log):
        return MissingHeader(missing)
    if CUBLAS_UNDECLARED.search(log) and not has_real_cublas(require_nvcc()):
        return MissingHeader(NO_CUBLAS)
    lines = log.splitlines()
    for i, ln in enumerate(lines):
        m = ERROR.match(ln.strip()) or GCC_ERROR.match(ln.strip())
        if m:
            where = f"{os.path.basename(m.group('file'))}:{m.group('line')}"
            site = where if os.path.abspath(m.group("file")) == os.path.abspath(origin) else ""
            msg = f"{where}: {tool}: error: {m.group('msg').strip()}"
            if not site:  # an error inside a header (a template's body): the candidate's line that instantiated it
                own = _instantiated_at(lines[i + 1:], origin)
                if own:
                    site = own
                    msg = f"{own}: {tool}: error (in {where}): {m.group('msg').strip()}"
            return ExtensionBuildError(msg, site)
    return ExtensionBuildError(f"{tool} failed: {_first_error(log)}")
