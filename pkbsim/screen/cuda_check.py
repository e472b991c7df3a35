"""Compile-check the CUDA sources a candidate hands to `load_inline`, without a GPU and without torch's
CUDA headers: the device-only fast path.

A full build of an extension that includes torch/extension.h takes 70-95 s and 3 GB here
(`docs/sources.md#compiling-inline-cuda`); the kernels alone compile in about a second. So the host side is
cut away: every top-level block that mentions torch, ATen, c10 or pybind11 is blanked (line numbers are
kept, so nvcc's line is the candidate's line), the rest goes to `nvcc -cubin -arch=sm_90a -Xptxas -v`.
An error inside the kept device code is the candidate's; an error that only the cut could cause (a name
defined in a blanked block) makes the check inconclusive, never a rejection. Results are cached by
content hash.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field

from pkbsim.cuda.device_pass import device_only
from pkbsim.cuda.toolchain import missing_header, wheel_headers
from pkbsim.ptx.compile import NVCC_MISSING, cache_root, find_nvcc

ERROR_LINE = re.compile(r"\((\d+)\): (?:catastrophic )?error:? (.*)")
ARCH = "sm_90a"
VERSION = 3  # of how nvcc's log is judged: part of the cache key, so that a change re-checks stored results


@dataclass
class CompileReport:
    status: str                    # ok | error | inconclusive | unavailable | missing (a header not installed here)
    message: str = ""
    line: int | None = None        # 1-based line in the checked source
    kernels: dict = field(default_factory=dict)  # name -> registers, smem_bytes, spill_stores, spill_loads
    seconds: float = 0.0
    cached: bool = False

    def to_json(self) -> dict:
        return asdict(self)


def cache_dir() -> str:
    return os.path.join(cache_root(), "nvcc-check")


def compile_check(source: str) -> CompileReport:
    """Check one CUDA translation unit (cached by the hash of the source and the include folders it adds)."""
    nvcc = find_nvcc()
    if nvcc is None:
        return CompileReport("unavailable", f"{NVCC_MISSING}; CUDA sources were not compile-checked")
    headers = wheel_headers(nvcc)  # NVIDIA's wheels' library headers, where the toolkit lacks them (as builds see them)
    key = hashlib.sha256(f"{ARCH}\0{VERSION}\0{' '.join(headers)}\0{source}".encode()).hexdigest()
    cached = os.path.join(cache_dir(), key + ".json")
    if os.path.exists(cached):
        with open(cached) as f:
            return CompileReport(**{**json.load(f), "cached": True})
    report = _run_nvcc(nvcc, source, headers)
    if report.status in ("ok", "error", "inconclusive"):
        try:
            os.makedirs(cache_dir(), exist_ok=True)
            tmp = cached + f".{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(report.to_json(), f)
            os.replace(tmp, cached)
        except OSError:
            pass  # a cache read-only to this process (a candidate's with no cache of its own): checked, not kept
    return report


def _run_nvcc(nvcc: str, source: str, headers: list[str] | tuple[str, ...] = ()) -> CompileReport:
    kept, blanked = device_only(source)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pkb-nvcc-") as d:
        src = os.path.join(d, "candidate.cu")
        with open(src, "w") as f:
            f.write(kept)
        cmd = [nvcc, "-cubin", f"-arch={ARCH}", "-std=c++17", "-lineinfo", "-Xptxas", "-v", *headers,
               "-o", os.path.join(d, "candidate.cubin"), src]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        except subprocess.TimeoutExpired:
            return CompileReport("unavailable", "nvcc took over 300 s", seconds=time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode == 0:
        return CompileReport("ok", kernels=parse_resources(log), seconds=seconds)
    if missing := missing_header(log):
        return CompileReport("missing", missing, seconds=seconds)
    errors = [(int(m.group(1)), m.group(2).strip()) for m in map(ERROR_LINE.search, log.splitlines()) if m]
    # a name the cut took away is often not nvcc's first error: `void f(uint32_t* p)` without the blanked
    # torch headers (which bring <cstdint>) is first "an inline __device__ variable must have internal linkage"
    undefined = [(line, msg) for line, msg in errors
                 if "undefined" in msg or "not declared" in msg or "is not a template" in msg]
    if undefined and blanked:
        line, msg = undefined[0]
        return CompileReport("inconclusive", f"line {line}: {msg} (the name may live in host code that "
                                             f"the device-only check leaves out)", line, seconds=seconds)
    if errors:
        line, msg = errors[0]
        return CompileReport("error", msg, line, seconds=seconds)
    return CompileReport("inconclusive", log.strip().splitlines()[-1] if log.strip() else "nvcc failed",
                         seconds=seconds)


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_resources(log: str) -> dict:
    """Per kernel: registers, shared memory, spills, from `-Xptxas -v` output."""
    kernels: dict = {}
    current = None
    for ln in log.splitlines():
        if m := _ENTRY.search(ln) or _PROPS.search(ln):
            current = kernels.setdefault(_demangle(m.group(1)), {})
        elif current is not None and (m := _SPILL.search(ln)):
            current.update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif current is not None and (m := _USED.search(ln)):
            current.update(registers=int(m.group(1)), smem_bytes=int(m.group(2) or 0))
    return kernels


def _demangle(name: str) -> str:
    tool = shutil.which("c++filt")
    if not tool or not name.startswith("_Z"):
        return name
    out = subprocess.run([tool, name], capture_output=True, text=True, check=False).stdout.strip()
    return out or name
