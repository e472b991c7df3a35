"""Builds a candidate's CUDA extensions before the functional stage, on a limit of their own.

A cold build of an inline-CUDA extension takes tens of seconds (nvcc, then g++ against torch); inside the
functional stage it would run on the simulated world's clock, on one rank while the others wait. So the
candidate is imported once beforehand, outside any world, under the same `load_inline` stand-in: every
extension it builds at import lands in the cache, and the ranks' own imports then find it there. What
fails at this import (code that needs a process group, a device) is left for the ranks to meet again.
"""
from __future__ import annotations

import ast
import os
import threading

from pkbsim.screen.candidate import Session, loader

BUILD_MARKERS = ("load_inline", "cpp_extension")
IMPORT_DEPTH = 3   # helper modules followed from the candidate, at most this deep


def builds_extensions(path: str, roots: tuple[str, ...] = ()) -> bool:
    """Whether the candidate file, or a module of its own it imports (found beside it or under `roots`, such
    as ParallelKernelBench's `utils.cuda_helpers.compile_cuda_extension`), mentions a CUDA extension build."""
    seen: set[str] = set()
    todo = [(os.path.abspath(path), 0)]
    folders = (os.path.dirname(os.path.abspath(path)), *roots)
    while todo:
        file, depth = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        try:
            with open(file, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        if any(m in text for m in BUILD_MARKERS):
            return True
        if depth < IMPORT_DEPTH:
            todo += [(found, depth + 1) for name in _imported(text) for found in _local(name, folders)]
    return False


def _imported(text: str) -> set[str]:
    """The modules a source imports (absolute names; a file that does not parse imports nothing here)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def _local(name: str, folders: tuple[str, ...]) -> list[str]:
    """The files module `name` would load from one of `folders` (none for installed packages)."""
    rel = name.replace(".", os.sep)
    return [p for d in folders if d for p in (os.path.join(d, rel + ".py"), os.path.join(d, rel, "__init__.py"))
            if os.path.isfile(p)]


def prebuild(session: Session, reference, limit: float) -> None:
    """Import the candidate once with its extensions built; give up waiting after `limit` seconds (the
    ranks then wait for the build that is still running, with the world's clock stopped)."""
    if not builds_extensions(session.path):   # one that builds through a helper module builds lazily
        return
    load = loader(session, reference)

    def run() -> None:
        try:
            load()
        except BaseException:  # noqa: BLE001 - the ranks' own import reports it, in the world
            pass

    worker = threading.Thread(target=run, name="pkb-prebuild", daemon=True)
    worker.start()
    worker.join(limit)
