"""A candidate's translation unit as two: its kernels for nvcc without torch's headers, its host code for g++.

nvcc spends most of a cold build on torch's headers in the host pass (cudafe++ parses them, then the host
compiler does again: about 24 of 26 s for a one-kernel candidate here). g++ can take them from a precompiled
header (host_header.py) where cudafe++ cannot. So, where the unit allows it:
- the kernel unit is the device-only cut (device_pass.py) less host-only functions: nvcc compiles it whole,
  making each kernel's PTX and its host stub, a function of the kernel's own name and signature (a
  template kernel's stubs are internal to the unit: each instance the host unit launches, `k<float>`, is
  handed over through a pointer of the unit's, `__pkb_<extension>_instance_N`);
- the host unit is the whole unit with each kernel's body dropped (its declaration now names that stub),
  device-only definitions blanked, and every `k<<<cfg>>>(args)` written as nvcc writes it,
  `(__cudaPushCallConfiguration(cfg) ? (void)0 : k(args))`.
Lines never move, so a message keeps the candidate's line. `split` gives None wherever the two units could
differ from the one (kernels in namespaces or static, cub and thrust, `__CUDACC__` tests): the caller builds
the whole unit as before, and so it does when either unit fails to build, so
that an error is always the one nvcc reports.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pkbsim.cuda import device_pass

# where g++ and nvcc's host pass would read the candidate's text differently (nvcc defines these)
NVCC_ONLY = re.compile(r"\b__(CUDACC|NVCC)\w*")
DEVICE_SPACE = re.compile(r"\b__(device|constant|shared|managed)__\b")
LAUNCH_BOUNDS = re.compile(r"\b__launch_bounds__\s*\(")
KERNEL_HEAD = re.compile(r'^(?P<template>template\s*<[^;{]*?>\s*)?(?:extern\s+"C"\s+)?__global__\s+(?:__launch_bounds__\s*\([^;{]*?\)\s*)?void\s+'
                         r'(?:__launch_bounds__\s*\([^;{]*?\)\s*)?(?P<name>[A-Za-z_]\w*)\s*\(')
FUNCTION_DEF = re.compile(r"\)\s*(?:const\s*)?(?:noexcept\s*)?\{")


@dataclass(frozen=True)
class Units:
    """The two sources (no kernel unit where the candidate has no device code at all) and its kernels' names."""
    kernel_unit: str | None
    host_unit: str
    kernels: tuple[str, ...]


def split(tu: str, extension_name: str) -> Units | None:
    """The kernel and host units of `tu`, or None where building them apart could differ from building it whole."""
    if NVCC_ONLY.search(tu) or device_pass.HOST_INSTANTIATED.search(tu) or \
            device_pass.device_only(tu)[0].count("__global__") != tu.count("__global__"):
        return None   # cub, thrust, or a kernel that names torch: the device-only cut would lose it
    kernel_parts, host_parts, kernels, templates, device = [], [], [], set(), False
    for _, chunk in device_pass._top_level_chunks(tu):
        code = _code(chunk)
        blank = "\n" * chunk.count("\n")
        if code.lstrip().startswith("#"):
            kernel_parts.append(chunk)
            host_parts.append(chunk)
        elif "__global__" in code:
            m = KERNEL_HEAD.match(code.lstrip())
            if m is None or code.count("__global__") != 1:
                return None   # a kernel inside a namespace, static, or more than one in a chunk
            kernels.append(m.group("name"))
            if m.group("template"):
                templates.add(m.group("name"))
            kernel_parts.append(chunk)
            host_parts.append(_declaration(chunk))
        elif DEVICE_SPACE.search(_head(code)) and "__host__" not in _head(code):
            kernel_parts.append(chunk)   # device-only: its own pass alone (host code naming it fails to build)
            host_parts.append(blank)
            device = True
        elif FUNCTION_DEF.search(code) and not DEVICE_SPACE.search(code) and "__host__" not in code \
                and not re.match(r"\s*(struct|class|union|enum|namespace|template)\b", code):
            kernel_parts.append(blank)   # host-only function: in the host unit alone (no second definition)
            host_parts.append(chunk)
        else:
            kernel_parts.append(chunk)
            host_parts.append(chunk)
    launched = _launches("".join(host_parts), kernels, templates)
    if launched is None:
        return None
    host_unit, instances = launched
    kernel_unit = device_pass.device_only("".join(kernel_parts))[0] if kernels or device else None
    # nvcc gives a template kernel's stubs internal linkage: the kernel unit hands the host unit each launched
    # instance's stub through a pointer of its own, which the host unit calls as the function it declares
    pointers = "".join(f"extern void* {_pointer(extension_name, i)};\n" for i in range(len(instances)))
    kernel_unit = (kernel_unit or "") + "".join(f"void* {_pointer(extension_name, i)} = (void*)&{k};\n"
                                                for i, k in enumerate(instances)) if instances else kernel_unit
    host_unit = re.sub(r"@pkb_instance_(\d+)@", lambda m: _pointer(extension_name, int(m.group(1))), host_unit)
    return Units(kernel_unit, f"#define TORCH_EXTENSION_NAME {extension_name}\n{pointers}{host_unit}",
                 tuple(kernels))


def _pointer(extension: str, i: int) -> str:
    return f"__pkb_{extension}_instance_{i}"


def _code(chunk: str) -> str:
    """`chunk` with comments and string literals' contents blanked (lengths and lines kept)."""
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"',
                  lambda m: m.group(0) if m.group(0) == '"C"' else re.sub(r"[^\n]", " ", m.group(0)), chunk,
                  flags=re.S)


def _head(code: str) -> str:
    """The text before the first `{`, `;` or `=`: a declaration's specifiers and declarator."""
    return re.split(r"[{;=]", code, maxsplit=1)[0]


def _declaration(chunk: str) -> str:
    """A kernel's definition as a declaration of its host stub: `__global__` and `__launch_bounds__` gone, the
    body blanked (lines kept)."""
    code = _code(chunk)
    body = code.find("{")
    head = chunk if body < 0 else chunk[:body]
    head = head.replace("__global__", "          ", 1)
    while (m := LAUNCH_BOUNDS.search(head)) is not None:
        end = _close(head, m.end() - 1)
        head = head[:m.start()] + re.sub(r"[^\n]", " ", head[m.start():end]) + head[end:]
    if body < 0:
        return head
    return head + ";" + "\n" * (chunk.count("\n") - head.count("\n"))   # where the body began: past any comment


def _close(text: str, open_at: int) -> int:
    """The index after the bracket that closes the one at `open_at` (len(text) if none)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for i in range(open_at, len(text)):
        c = text[i]
        if c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
    return len(text)


def _launches(host: str, kernels: list[str], templates: set[str]) -> tuple[str, list[str]] | None:
    """`host` with each `k<<<cfg>>>(args)` as nvcc lowers it, and the template kernels' instances it launches
    (`k<T>`, in order; such a launch calls `@pkb_instance_N@`, the instance's stub pointer, as `k<T>`); None
    for a launch it cannot read, or a kernel called without a launch configuration (nvcc's error, which the
    whole unit gives)."""
    code = _code(host)
    for name in kernels:
        for use in re.finditer(rf"\b{name}\b", code):
            after = _skip_template_args(code, use.end())
            if code.startswith("<<<", after) or not code[after:].lstrip().startswith("("):
                continue   # a launch, or the kernel's address (cudaFuncSetAttribute(k, ...))
            if not re.search(r"\bvoid\s*$", code[max(0, use.start() - 64):use.start()]):
                return None   # not its declaration: a plain call
    out, at, instances = [], 0, []
    for launch in re.finditer("<<<", code):
        if launch.start() < at:
            continue
        callee = _callee(code, launch.start())
        if callee is None or callee[1] not in kernels:
            return None   # an expression's launch (a function pointer, a member)
        start, name = callee
        cfg_end = code.find(">>>", launch.end())
        paren = cfg_end + 3
        while 0 <= cfg_end and paren < len(code) and code[paren] in " \t\n":
            paren += 1
        if cfg_end < 0 or paren >= len(code) or code[paren] != "(":
            return None
        end = _close(code, paren)
        if code[end - 1] != ")":
            return None
        kernel = host[start:launch.start()].strip()
        if name in templates:
            if "<" not in kernel:
                return None   # template arguments deduced from the call: the kernel unit cannot name them
            instance = re.sub(r"\s+", " ", kernel)
            if instance not in instances:
                instances.append(instance)
            kernel = f"reinterpret_cast<decltype(&{instance})>(@pkb_instance_{instances.index(instance)}@)"
        out += [host[at:start],
                f"(__cudaPushCallConfiguration({host[launch.end():cfg_end]}) ? (void)0 : {kernel}{host[paren:end]})"]
        at = end
    return "".join(out) + host[at:], instances


def _skip_template_args(code: str, at: int) -> int:
    """The index after `<...>` at `at` (past whitespace), or `at` where none starts there (`<<<` is no list)."""
    i = at
    while i < len(code) and code[i] in " \t\n":
        i += 1
    if i >= len(code) or code[i] != "<" or code.startswith("<<<", i):
        return at
    depth = 0
    for j in range(i, len(code)):
        depth += {"<": 1, ">": -1}.get(code[j], 0)
        if depth == 0:
            return j + 1
        if code[j] in ";{}":
            break
    return at


def _callee(code: str, launch_at: int) -> tuple[int, str] | None:
    """(where it starts, its name) of the kernel before the `<<<` at `launch_at`: `k` or `k<args>`."""
    i = launch_at
    while i > 0 and code[i - 1] in " \t\n":
        i -= 1
    if i > 0 and code[i - 1] == ">":
        depth = 0
        while i > 0:
            i -= 1
            depth += {">": 1, "<": -1}.get(code[i], 0)
            if depth == 0:
                break
            if code[i] in ";{}":
                return None
        while i > 0 and code[i - 1] in " \t\n":
            i -= 1
    m = re.search(r"[A-Za-z_]\w*$", code[:i])
    return (m.start(), m.group(0)) if m else None
