"""Keeps torch's headers out of nvcc's device pass when the kernels do not need them.

nvcc parses a translation unit twice: for the device (cicc) and for the host (cudafe++, then gcc). With
torch's headers each pass takes tens of seconds, and the device pass is about a third of a cold build.
The device code of most candidates needs none of those headers: `device_only` blanks every top-level
block that mentions torch, ATen, c10 or pybind11 (line numbers kept, so nvcc's lines stay the
candidate's). When every kernel survives that cut and none is a template (host code may be what
instantiates it; cub's and thrust's kernels are such templates), `split` gives the device pass the cut source behind `#ifdef __CUDA_ARCH__`, while the
host pass sees the whole unit after the prelude. The screen's compile check (cuda_check.py) compiles the
same cut on its own.
"""
from __future__ import annotations

import re

HOST_MARKERS = re.compile(r"\b(torch|at|c10|pybind11|py)::|\bTensor\b|\bTORCH_|\bPYBIND11_|\bAT_DISPATCH|\bC10_|"
                          r"#\s*include\s*[<\"](torch|ATen|c10|pybind11)/")
TEMPLATE_KERNEL = re.compile(r"template\s*<[^;{]*__global__")
# libraries whose kernels are templates that host calls instantiate (cub::DeviceSegmentedRadixSort::SortPairs
# from a function taking torch::Tensor): the cut would drop the call, so nvcc would neither compile nor
# register those kernels, and cub reports cudaErrorInvalidDeviceFunction without launching anything
HOST_INSTANTIATED = re.compile(r"#\s*include\s*[<\"](cub|thrust)/")


def split(tu: str, prelude: str) -> str | None:
    """`tu` with the device pass on its device-only cut and the host pass on all of it after `prelude`
    (which then is not force-included); None when a kernel would be lost or left uninstantiated."""
    kept, _ = device_only(tu)
    if kept.count("__global__") != tu.count("__global__") or TEMPLATE_KERNEL.search(kept) or \
            HOST_INSTANTIATED.search(tu):
        return None
    return f'#ifdef __CUDA_ARCH__\n{kept}\n#else\n#include "{prelude}"\n{tu}\n#endif\n'


# a namespace alias or using-directive naming a namespace only the blanked headers declare (`namespace py =
# pybind11;` is no host block: nothing in it names a member); the cut declares that namespace empty
CUT_NAMESPACE = re.compile(r"\bnamespace\s+\w+\s*=\s*(torch|at|c10|pybind11)\s*;|\busing\s+namespace\s+(torch|at|c10|pybind11)\s*;")


def device_only(source: str) -> tuple[str, set[int]]:
    """The source with host-only top-level blocks blanked, and the (1-based) lines that were blanked. The
    namespaces of the blanked headers that kept code still names are declared empty ahead of it, with a
    `#line 1` so that nvcc's line numbers stay the candidate's."""
    out, blanked = [], set()
    for start, chunk in _top_level_chunks(source):
        if HOST_MARKERS.search(chunk):
            lines = chunk.count("\n")
            blanked.update(range(start, start + lines + (0 if chunk.endswith("\n") else 1)))
            out.append("\n" * lines)
        else:
            out.append(chunk)
    kept = "".join(out)
    named = sorted({a or b for a, b in CUT_NAMESPACE.findall(kept)})
    if named:
        kept = " ".join(f"namespace {n} {{}}" for n in named) + "\n#line 1\n" + kept
    return kept, blanked


def _top_level_chunks(source: str):
    """(first line, text) of each top-level item: a preprocessor line, or code up to a `;` or `}` at depth 0."""
    i, line, n = 0, 1, len(source)
    while i < n:
        j, depth, start_line = i, 0, line
        at_line_start = source[i:].lstrip(" \t").startswith("#")
        if at_line_start:  # a preprocessor directive, with its continuation lines
            while j < n and not (source[j] == "\n" and source[j - 1] != "\\"):
                j += 1
        else:
            while j < n:
                c = source[j]
                if c == "/" and source.startswith("//", j):
                    j = source.find("\n", j) if source.find("\n", j) >= 0 else n
                    continue
                if c == "/" and source.startswith("/*", j):
                    j = source.find("*/", j) + 2 if source.find("*/", j) >= 0 else n
                    continue
                if c in "\"'":
                    k = j + 1
                    while k < n and source[k] != c:
                        k += 2 if source[k] == "\\" else 1
                    j = k + 1
                    continue
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        j += 1
                        while j < n and source[j] in " \t;":
                            j += 1
                        break
                elif depth == 0 and (c == ";" or (c == "\n" and not source[i:j].strip())):
                    j += 1
                    break
                j += 1
        j = min(j + (1 if j < n and source[j] == "\n" else 0), n)
        chunk = source[i:j]
        yield start_line, chunk
        line += chunk.count("\n")
        i = j
