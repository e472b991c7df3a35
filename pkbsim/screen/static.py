"""Stage 1 without running anything: the file parses, defines `solution`, and does not replace torch,
timing or harness objects (a candidate that patches `time.perf_counter` or `torch.allclose` is cheating,
whatever its outputs). The signature is checked when each rank imports the file (candidate.py)."""
from __future__ import annotations

import ast
import os

from pkbsim.screen.result import Reason, ReasonKind

# modules whose attributes a candidate must not replace
WATCHED_ROOTS = {"torch", "time", "threading", "numpy", "tasks", "pkbsim", "hwbackend", "builtins", "sys",
                 "triton", "random", "gc"}
# configuration namespaces that are meant to be assigned (torch.backends.cuda.matmul.allow_tf32 = True)
CONFIG_PARTS = {"backends", "config", "_dynamo", "_inductor", "flags", "environ"}


def static_reasons(path: str) -> list[Reason]:
    name = os.path.basename(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        return [Reason(ReasonKind.UNREADABLE, f"cannot read {name}: {e}")]
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        return [Reason(ReasonKind.COMPILE_ERROR, f"{name}:{e.lineno}: syntax error: {e.msg}", f"{path}:{e.lineno}")]
    reasons = [] if _binds_solution(tree) else [
        Reason(ReasonKind.SIGNATURE,
               f"{name} defines no solution(...) at module level; define it with the task's signature")]
    return reasons + _tampering(tree, path)


def _binds_solution(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "solution":
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "solution" for t in targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == "solution"
                                                                  for a in node.names):
            return True
        if isinstance(node, (ast.If, ast.Try)) and _binds_solution(ast.Module(body=_blocks(node), type_ignores=[])):
            return True
    return False


def _blocks(node) -> list:
    body = list(node.body) + list(getattr(node, "orelse", []))
    for h in getattr(node, "handlers", []):
        body += h.body
    return body


def _imported_roots(tree: ast.Module) -> dict[str, str]:
    """Local name -> top-level module for every import of a watched module."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                root = a.name.split(".")[0]
                if root in WATCHED_ROOTS:
                    names[a.asname or root] = a.name if a.asname else root
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in WATCHED_ROOTS:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _chain(node) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _tampering(tree: ast.Module, path: str) -> list[Reason]:
    roots = _imported_roots(tree)
    hits = []
    for node in ast.walk(tree):
        targets: list = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
              and node.args):
            targets = [ast.Attribute(value=node.args[0], attr="<setattr>")]
        for t in targets:
            chain = _chain(t) if isinstance(t, ast.Attribute) else None
            if not chain or chain[0] not in roots or CONFIG_PARTS & set(chain):
                continue
            full = ".".join([roots[chain[0]], *chain[1:]])
            hits.append(Reason(ReasonKind.TAMPERING, f"line {node.lineno} replaces {full}: a candidate may not patch "
                                                     f"torch, timing or harness objects", f"{path}:{node.lineno}"))
    return hits
