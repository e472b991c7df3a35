"""PTX text -> functions, variables and instructions, each instruction tagged with its source line.

The line map comes from `.loc` directives: an instruction reports the user's file and line; code
inlined from CUDA headers reports the user line it was inlined at. Inline-asm scopes (`{ ... }` in a
body) may redeclare register names, so scoped declarations are renamed apart.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .dtypes import carrier
from .errors import NotSimulated


@dataclass
class Instr:
    opcode: str
    operands: list[str]
    guard: tuple[str, bool] | None  # (predicate register, negated)
    loc: str
    parts: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.parts = self.opcode.split(".")


@dataclass
class Var:
    name: str
    space: str            # shared / local / global / const / param
    type: str
    size: int             # bytes; 0 for an extern (dynamic) shared array
    align: int
    init: bytes | None = None


@dataclass
class Function:
    name: str
    is_entry: bool
    params: list[Var]
    returns: list[Var]
    regs: dict[str, str] = field(default_factory=dict)       # register -> declared type
    vars: list[Var] = field(default_factory=list)           # shared/local declared in the body
    code: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)


@dataclass
class Program:
    functions: dict[str, Function]
    globals: list[Var]
    files: dict[int, str]


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_LABEL = re.compile(r"^([A-Za-z_$%][\w$.]*)\s*:(?!:)")
_REGDECL = re.compile(r"^([%\w$]+)<(\d+)>$")
_FUNC_HDR = re.compile(r"\.(entry|func)\s*(\((?P<ret>[^)]*)\))?\s*(?P<name>[\w$]+)\s*(\((?P<params>[^)]*)\))?", re.DOTALL)
_LOC = re.compile(r"\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*inlined_at\s+(\d+)\s+(\d+))?")
_FILE = re.compile(r'\.file\s+(\d+)\s+"([^"]*)"')
_TOKEN = re.compile(r"%?[A-Za-z_$][\w$]*")


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets and braces."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    tail = "".join(cur).strip()
    if tail:
        out.append(tail)
    return out


def parse_var(decl: str, space: str) -> Var:
    """`.align 4 .b8 name[1024] = {...}` (after the space keyword) -> Var."""
    init = None
    if "=" in decl:
        decl, init_text = decl.split("=", 1)
        init = init_text.strip()
    toks = decl.replace("[", " [").split()
    align, vec, typ, name, dims = 0, 1, None, None, []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t == ".align":
            align = int(toks[i + 1]); i += 2; continue
        if t in (".extern", ".visible", ".weak", ".common", ".ptr"):
            i += 1; continue
        if t.startswith(".v") and t[2:].isdigit():
            vec = int(t[2:]); i += 1; continue
        if t.startswith(".") and typ is None:
            typ = t[1:]; i += 1; continue
        if t.startswith("["):
            inner = t.strip("[]")
            dims.append(int(inner) if inner else 0)
            i += 1; continue
        name = t; i += 1
    if typ is None or name is None:
        raise NotSimulated(f"declaration '{decl.strip()}'", "ptx")
    item = carrier(typ).itemsize * vec
    size = item
    for d in dims:
        size *= d
    data = None
    if init is not None:
        values = [v.strip() for v in init.strip("{} ").replace("{", "").replace("}", "").split(",") if v.strip()]
        if any(not re.match(r"^[-+0-9.xXa-fA-FdD]+$", v) for v in values):
            raise NotSimulated(f"initializer of {name} with addresses", "ptx")
        arr = np.array([parse_number(v, typ) for v in values]).astype(carrier(typ))
        data = arr.tobytes().ljust(size, b"\0")
    return Var(name, space, typ, size, align or carrier(typ).itemsize, data)


def parse_number(text: str, typ: str = "s64"):
    """A PTX immediate: 0fXXXXXXXX / 0dXXXXXXXXXXXXXXXX bit patterns, hex, octal-free ints, decimals."""
    t = text.strip()
    neg = t.startswith("-")
    body = t[1:] if neg else t
    if body[:2] in ("0f", "0F") and len(body) == 10:
        v = float(np.uint32(int(body[2:], 16)).view(np.float32))
    elif body[:2] in ("0d", "0D") and len(body) == 18:
        v = float(np.uint64(int(body[2:], 16)).view(np.float64))
    elif body[:2] in ("0x", "0X"):
        v = int(body[2:].rstrip("Uu"), 16)
    elif re.match(r"^\d+[Uu]?$", body):
        v = int(body.rstrip("Uu"))
    else:
        v = float(body)
    return -v if neg else v


class _Scopes:
    """Renames registers declared and labels defined inside inline-asm braces so that they cannot clash
    (an inlined `{ LAB_WAIT: ... bra LAB_WAIT; }` block appears once per call site)."""

    def __init__(self, labels: list[set[str]] | None = None):
        self.stack: list[dict[str, str]] = []
        self.counter = 0
        self.labels = list(labels or [])   # labels of each brace scope, in order of their opening brace
        self.opened = 0

    def push(self):
        self.stack.append({})
        own = self.labels[self.opened] if self.opened < len(self.labels) else ()
        self.opened += 1
        for name in sorted(own):
            self.declare(name)

    def pop(self):
        if self.stack:
            self.stack.pop()

    def declare(self, name: str) -> str:
        if not self.stack:
            return name
        self.counter += 1
        new = f"{name}@{self.counter}"
        self.stack[-1][name] = new
        return new

    def rename(self, text: str) -> str:
        if not any(self.stack):
            return text

        def sub(m):
            for scope in reversed(self.stack):
                if m.group(0) in scope:
                    return scope[m.group(0)]
            return m.group(0)
        return _TOKEN.sub(sub, text)


def _scoped_labels(pieces: list[str]) -> list[set[str]]:
    """The labels defined directly in each brace scope, in order of the scopes' opening braces."""
    out: list[set[str]] = []
    stack: list[int] = []
    for piece in pieces:
        s = piece.strip()
        while s:
            if s[0] == "{":
                out.append(set()); stack.append(len(out) - 1); s = s[1:].strip(); continue
            if s[0] == "}":
                if stack:
                    stack.pop()
                s = s[1:].strip(); continue
            m = _LABEL.match(s)
            if m and not s.startswith("."):
                if stack:
                    out[stack[-1]].add(m.group(1))
                s = s[m.end():].strip()
                continue
            break
    return out


def _parse_body(fn: Function, body: str, files: dict[int, str], main_files: set[str]) -> None:
    lines = []
    for ln in body.split("\n"):
        s = ln.strip()
        lines.append(s + ";" if _LOC.match(s) else s)
    text = "\n".join(lines)
    pieces = text.split(";")
    scopes = _Scopes(_scoped_labels(pieces))
    loc = f"{fn.name}:?"
    for piece in pieces:
        s = piece.strip()
        while s:
            if s[0] == "{":
                scopes.push(); s = s[1:].strip(); continue
            if s[0] == "}":
                scopes.pop(); s = s[1:].strip(); continue
            m = _LABEL.match(s)
            if m and not s.startswith("."):
                fn.labels[scopes.rename(m.group(1))] = len(fn.code)
                s = s[m.end():].strip()
                continue
            break
        if not s:
            continue
        if _LOC.match(s):
            where = _loc_text(s, files, main_files)
            # code inlined from headers (several levels deep) keeps the user's line that led into it
            if where is not None and (where.rsplit(":", 1)[0] in main_files or loc.endswith(":?")):
                loc = where
        elif s.startswith(".reg"):
            _declare_regs(fn, s, scopes)
        elif s.startswith((".shared", ".local", ".global", ".const")):
            space = s.split()[0][1:]
            fn.vars.append(parse_var(s[len(space) + 1:], space))
        elif s.startswith(".param"):           # a call site's argument or return slot
            var = parse_var(s[len(".param"):], "param")
            var.name = scopes.declare(var.name)
            fn.vars.append(var)
        elif s.startswith("."):
            continue  # .pragma, .maxntid and friends: no semantics to model
        else:
            fn.code.append(_parse_instr(scopes.rename(s), loc))


def _loc_text(s: str, files: dict[int, str], main_files: set[str]) -> str | None:
    m = _LOC.match(s)
    if not m:
        return None
    fname = files.get(int(m.group(1)), "?")
    if fname not in main_files and m.group(3):
        fname, line = files.get(int(m.group(3)), "?"), m.group(4)
    else:
        line = m.group(2)
    return f"{fname}:{line}"


def _declare_regs(fn: Function, s: str, scopes: _Scopes) -> None:
    toks = s.replace(",", " ").split()
    typ = next(t[1:] for t in toks[1:] if t.startswith(".") and not t.startswith(".v"))
    for name in toks[1:]:
        if name.startswith("."):
            continue
        m = _REGDECL.match(name)
        if m:
            for i in range(int(m.group(2))):
                fn.regs[scopes.declare(f"{m.group(1)}{i}")] = typ
        else:
            fn.regs[scopes.declare(name)] = typ


def _parse_instr(s: str, loc: str) -> Instr:
    guard = None
    if s.startswith("@"):
        g, s = s.split(None, 1)
        guard = (g[2:], True) if g[1] == "!" else (g[1:], False)
    parts = s.split(None, 1)
    operands = _split_top(parts[1]) if len(parts) > 1 else []
    return Instr(parts[0], operands, guard, loc)


def _parse_params(text: str | None) -> list[Var]:
    if not text or not text.strip():
        return []
    out = []
    for p in _split_top(text):
        p = p.strip()
        if p.startswith(".param"):
            out.append(parse_var(p[len(".param"):], "param"))
        elif p.startswith(".reg"):
            out.append(parse_var(p[len(".reg"):], "reg"))
    return out


def _top_level_statements(text: str):
    """Yield (header, body-or-None) for each top-level statement, skipping braces of initializers."""
    i, n = 0, len(text)
    while i < n:
        semi, brace = text.find(";", i), text.find("{", i)
        if semi < 0 and brace < 0:
            return
        if brace >= 0 and (semi < 0 or brace < semi):
            header = text[i:brace]
            depth, j = 0, brace
            while j < n:
                depth += text[j] == "{"
                depth -= text[j] == "}"
                j += 1
                if depth == 0:
                    break
            if "=" in header:  # an initializer list: keep reading to its ';'
                end = text.find(";", j)
                yield text[i:end].strip(), None
                i = end + 1
            else:
                yield header.strip(), text[brace + 1:j - 1]
                i = j
        else:
            yield text[i:semi].strip(), None
            i = semi + 1


def parse(ptx: str, main_files: set[str] | None = None) -> Program:
    files = {int(m.group(1)): m.group(2) for m in _FILE.finditer(ptx)}
    main = set(main_files or ()) | {f for f in files.values() if "/cuda" not in f and "include/" not in f}
    text = _COMMENT.sub("", ptx)
    text = "\n".join(ln for ln in text.split("\n")
                     if not ln.strip().startswith((".file", ".version", ".target", ".address_size")))
    program = Program({}, [], files)
    for header, body in _top_level_statements(text):
        h = " ".join(header.split())
        if h.startswith(".section") or not h:
            continue
        m = _FUNC_HDR.search(h)
        if m and body is not None:
            fn = Function(m.group("name"), m.group(1) == "entry", _parse_params(m.group("params")),
                          _parse_params(m.group("ret")))
            _parse_body(fn, body, files, main)
            program.functions[fn.name] = fn
        elif m:
            continue  # a declaration (.extern .func vprintf): resolved at the call
        else:
            for space in ("global", "const", "shared"):
                if re.search(rf"(^|\s)\.{space}\s", h + " "):
                    program.globals.append(parse_var(h.split(f".{space}", 1)[1], space))
                    break
    return program
