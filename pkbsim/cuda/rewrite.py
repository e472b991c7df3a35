"""A candidate's CUDA/C++ text made to run on CPU tensors, and its sources joined into one TU.

Rewrites apply to the candidate's own text only (torch headers are untouched) and never add a line,
so the `#line` directives keep nvcc's messages and the PTX line map on the candidate's `.py` lines.
"""
from __future__ import annotations

import re

RULES = [
    (re.compile(r"\.(\s*)is_cuda(\s*)\(\s*\)"), r".\1is_cpu\2()"),
    (re.compile(r"\bkCUDA\b"), "kCPU"),
    (re.compile(r"\bDeviceType\s*::\s*CUDA\b"), "DeviceType::CPU"),
    # a CUDA device's index has no CPU twin: `cpu:5` is rejected by from_blob ("does not match device of data")
    (re.compile(r"\bDevice(\s+[A-Za-z_]\w*)?\s*\(\s*(?:(?:torch|at|c10)\s*::\s*)?(?:kCPU|DeviceType::CPU)\s*,"
                r"(?:[^()\n]|\((?:[^()\n]|\([^()\n]*\))*\))*\)"), r"Device\1(c10::kCPU)"),
    (re.compile(r"\b(Optional)?CUDAGuard\b(?!\.h)"), r"Sim\1CUDAGuard"),
    (re.compile(r"\b([A-Za-z_]\w*)\s*\.\s*get_device\s*\(\s*\)"), r"::sim_get_device(\1)"),
]
FULL_TORCH = re.compile(r"torch::(nn|optim|data|jit|serialize)\b")


def rewrite(text: str) -> str:
    for pattern, repl in RULES:
        text = pattern.sub(repl, text)
    return text


def locate(source: str, file_text: str | None) -> int | None:
    """The line (1-based) in `file_text` where `source` starts, if it is a literal there."""
    if not file_text:
        return None
    lines = source.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return None
    at = file_text.find(lines[first])
    if at < 0:
        return None
    return file_text.count("\n", 0, at) + 1 - first


def bindings(functions) -> str:
    """The PYBIND11_MODULE load_inline generates for `functions` (a list, or a dict name -> docstring)."""
    items = functions.items() if isinstance(functions, dict) else ((f, "") for f in _names(functions))
    defs = "".join(f'  m.def("{f}", torch::wrap_pybind_function({f}), "{doc}");\n' for f, doc in items)
    return f"PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}}}\n" if defs else ""


def undeclared(functions, cpp_sources: list[str]) -> list[str]:
    """The `functions` torch's load_inline could not bind: it compiles cpp_sources with the bindings in their
    own file (main.cpp) and cuda_sources apart, so a bound function needs a declaration in cpp_sources. Names
    the C++ sources never mention (a quoted #include may declare them: then none is listed)."""
    text = "\n".join(cpp_sources)
    if re.search(r'^\s*#\s*include\s*"', text, re.M):
        return []
    return [f for f in _names(functions) if not re.search(rf"\b{re.escape(f.split('::')[-1])}\b", text)]


def _names(functions) -> list[str]:
    """load_inline's `functions`: a name, a list of names, or a dict name -> docstring."""
    return [functions] if isinstance(functions, str) else list(functions or ())


def translation_unit(name: str, cuda_sources: list[str], cpp_sources: list[str], functions, origin: str,
                     origin_text: str | None) -> str:
    """CUDA sources, then C++ sources, then the bindings; each source starts with a #line into `origin`."""
    parts = []
    for i, src in enumerate([*cuda_sources, *cpp_sources]):
        line = locate(src, origin_text)
        label = origin if line is not None else f"{name}_source{i}"
        parts.append(f'#line {line or 1} "{label}"\n{rewrite(src)}\n')
    parts.append(f'#line 1 "{name}_bindings"\n{bindings(functions)}')
    return "".join(parts)
