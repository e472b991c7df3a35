"""The candidate file in a model's reply: one fenced Python block that parses and defines `solution` with the
task's parameters. Anything else is a malformed reply, answered with one message the model can act on (no
screen is spent on it)."""
from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass

FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
PYTHON_TAGS = {"", "python", "py", "python3"}
FORMAT = "Reply with the whole candidate file in exactly one ```python code block."


@dataclass(frozen=True)
class Extracted:
    code: str | None      # the candidate file, when the reply holds exactly one usable one
    problem: str = ""     # else: what is wrong, addressed to the model
    kind: str = ""        # no_code, several_files, syntax, no_solution, signature


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line of the opening fence, body) of each fenced block tagged as Python or untagged."""
    out = []
    for m in FENCE.finditer(text):
        if m.group(2).lower() in PYTHON_TAGS:
            out.append((text.count("\n", 0, m.start()) + 1, m.group(3)))
    return out


def extract(text: str, reference) -> Extracted:
    """The candidate in `text`; `reference` is the task's reference callable (its parameters are the contract)."""
    blocks = python_blocks(text)
    if not blocks:
        if "```" in text or "~~~" in text:
            return Extracted(None, "Your reply has a code block, but none tagged python (or one left unclosed). "
                                   + FORMAT, "no_code")
        return Extracted(None, "Your reply has no code block. " + FORMAT, "no_code")
    if len(blocks) > 1:
        defining = [ln for ln, body in blocks if _defines_solution(body)]
        lines = ", ".join(str(ln) for ln, _ in blocks)
        return Extracted(None, f"Your reply has {len(blocks)} Python code blocks (opening at reply lines {lines})"
                               f"{f', {len(defining)} of them defining solution' if defining else ''}; the candidate "
                               f"is one file. Merge everything into one module. " + FORMAT, "several_files")
    code = blocks[0][1]
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        src = (e.text or "").rstrip()
        return Extracted(None, f"Your file does not parse: {e.msg} at line {e.lineno}"
                               + (f": `{src.strip()}`" if src.strip() else "") + ". " + FORMAT, "syntax")
    fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name == "solution"), None)
    want = f"solution{inspect.signature(reference)}"
    if fn is None:
        return Extracted(None, f"Your file defines no top-level `solution`; define `{want}`. " + FORMAT, "no_solution")
    problem = signature_problem(fn, reference)
    if problem:
        return Extracted(None, f"{problem} (line {fn.lineno}); the task calls `{want}`. Keep the reference's "
                               f"parameters. " + FORMAT, "signature")
    return Extracted(code if code.endswith("\n") else code + "\n")


def _defines_solution(body: str) -> bool:
    try:
        return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "solution"
                   for n in ast.parse(body).body)
    except SyntaxError:
        return "def solution" in body


def signature_problem(fn: ast.FunctionDef, reference) -> str:
    """Why `fn` cannot be called as the task calls it (positionally, with the reference's arguments), or ''."""
    params = [p for p in inspect.signature(reference).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    need = len([p for p in params if p.default is p.empty])
    most = len(params)
    a = fn.args
    if a.kwonlyargs and any(d is None for d in a.kw_defaults):
        return (f"`solution` has keyword-only parameters without defaults "
                f"({', '.join(k.arg for k in a.kwonlyargs)})")
    positional = a.posonlyargs + a.args
    required = len(positional) - len(a.defaults)
    if required > need:
        return f"`solution` requires {required} arguments, the task passes {need}"
    if len(positional) < most and a.vararg is None:
        return f"`solution` takes {len(positional)} positional arguments, the task may pass {most}"
    return ""
