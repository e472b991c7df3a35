"""The layering, checked from the source (docs/layout.md#dependency-direction).

    frontdoor          imports nothing of ours: the libraries' lazy exports, shared by both
    tasks              imports nothing of ours but tasks
    candidate_sandbox  imports nothing of ours (whoever re-runs a command in it passes the command as data)
    pkbsim, hwbackend  peers: neither imports the other; both may import frontdoor, tasks and candidate_sandbox
    pkb                the shell above them all; nothing of the libraries imports it, and it imports each
                       library only through its front door (`from pkbsim import ScreenResult`: the names
                       pkbsim/__init__.py and hwbackend/__init__.py export), never a module inside it

Every import counts for these rules: module-level ones and those inside functions, `importlib.import_module`
and `__import__` with a constant name too. Import cycles among a package's modules, in every package, count
module-level imports only (outside `if TYPE_CHECKING:`): an import inside a function runs when it is called,
after every module involved has loaded, so it cannot leave one half-initialised. `circles` counts those too;
the libraries and tasks have none.

The checker is `layering_violations(root)`; its buggy twin is a small synthetic tree written to tmp_path.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass

import networkx as nx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = ("frontdoor", "tasks", "candidate_sandbox", "pkbsim", "hwbackend", "pkb")
FORBIDDEN = {  # package -> the packages of ours it must not import
    "frontdoor": {"tasks", "candidate_sandbox", "pkbsim", "hwbackend", "pkb"},
    "tasks": {"frontdoor", "candidate_sandbox", "pkbsim", "hwbackend", "pkb"},
    "candidate_sandbox": {"frontdoor", "tasks", "pkbsim", "hwbackend", "pkb"},
    "pkbsim": {"hwbackend", "pkb"},
    "hwbackend": {"pkbsim", "pkb"},
    "pkb": set(),
}
ACYCLIC = OURS  # packages whose modules must not import each other in a circle at module level
FRONT_DOORS = {"pkb": ("pkbsim", "hwbackend")}  # package -> the libraries it imports only through their __init__
_ABOVE_THE_WORLD = ("pkbsim.symm", "pkbsim.device", "pkbsim.cuda", "pkbsim.plugins", "pkbsim.screen",
                    "pkbsim.taskrun", "pkbsim.taskcheck")
INNER = {  # a part of a package -> the modules of ours it must not import (a prefix names a package's modules)
    # the world's core (its engine and its torch stand-ins) knows its plug-ins only through
    # pkbsim/world/plugins.py: none of the three, nor pkbsim/plugins.py, which registers them (the entry points
    # import that), nor what runs on the world
    "pkbsim.world": _ABOVE_THE_WORLD,
    "pkbsim.standins": _ABOVE_THE_WORLD,
}


@dataclass(frozen=True)
class Import:
    source: str       # the importing module, dotted
    target: str       # the imported module, dotted (a submodule where `from X import name` names one)
    line: int
    module_level: bool
    runs: bool = True  # False inside `if TYPE_CHECKING:`


def modules(root: str, package: str) -> dict[str, str]:
    """Dotted module name -> file, for every .py file below root/package."""
    out = {}
    for folder, dirs, files in os.walk(os.path.join(root, package)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for f in sorted(files):
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), root)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                out[".".join(rel)] = os.path.join(folder, f)
    return out


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports_of(name: str, path: str, known: set[str]) -> list[Import]:
    """The imports in one module. `from X import n` targets X.n where that is a known module, else X."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    is_package = os.path.basename(path) == "__init__.py"
    out: list[Import] = []

    def resolve(module: str | None, level: int) -> str:
        if not level:
            return module or ""
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (level - 1)] if level > 1 else base
        return ".".join([*base, module] if module else base)

    def visit(node: ast.AST, module_level: bool, runs: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            module_level = False
        if isinstance(node, ast.If) and _type_checking(node):
            module_level = runs = False  # never runs: no part of a cycle (still bound by the layering rules)
        if isinstance(node, ast.Import):
            out.extend(Import(name, a.name, node.lineno, module_level, runs) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node.module, node.level)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append(Import(name, sub if sub in known else base, node.lineno, module_level, runs))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))):
            out.append(Import(name, node.args[0].value, node.lineno, module_level, runs))
        for child in ast.iter_child_nodes(node):
            visit(child, module_level, runs)

    visit(tree, True, True)
    return out


def top(module: str) -> str:
    return module.split(".")[0]


def layering_violations(root: str, forbidden: dict[str, set[str]] = FORBIDDEN,
                        acyclic: tuple[str, ...] = ACYCLIC,
                        front_doors: dict[str, tuple[str, ...]] = FRONT_DOORS) -> list[str]:
    """One line per import that breaks the layering (a forbidden package, or a library's module reached past
    its front door), and one per import cycle among an acyclic package's modules (module-level imports);
    empty when the tree is layered."""
    files = {}
    for package in forbidden:
        files.update(modules(root, package))
    known = set(files)
    found = []
    graphs = {p: nx.DiGraph() for p in acyclic}
    for name, path in sorted(files.items()):
        package = top(name)
        for imp in imports_of(name, path, known):
            if top(imp.target) in forbidden[package]:
                kind = "" if imp.module_level else " (inside a function)"
                found.append(f"{imp.source} imports {imp.target}{kind} at line {imp.line}: "
                             f"{package} must not import {top(imp.target)}")
            elif top(imp.target) in front_doors.get(package, ()) and imp.target != top(imp.target):
                kind = "" if imp.module_level else " (inside a function)"
                found.append(f"{imp.source} imports {imp.target}{kind} at line {imp.line}: {package} imports "
                             f"{top(imp.target)} only through its front door ({top(imp.target)}/__init__.py)")
            if package in graphs and top(imp.target) == package and imp.module_level and imp.target in known:
                if imp.target != name:
                    graphs[package].add_edge(name, imp.target, line=imp.line)
    for package, g in graphs.items():
        for scc in nx.strongly_connected_components(g):
            if len(scc) > 1:
                cycle = nx.find_cycle(g.subgraph(scc))
                path = " -> ".join(f"{a} (line {g.edges[a, b]['line']})" for a, b in cycle) + f" -> {cycle[0][0]}"
                found.append(f"import cycle in {package} at module level: {path}")
    return found


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def inner_violations(root: str, inner: dict[str, tuple[str, ...]] = INNER) -> list[str]:
    """One line per import (anywhere in a module) by which a part of a package imports what it must not."""
    found = []
    for part, banned in inner.items():
        files = modules(root, top(part))
        for name, path in sorted(files.items()):
            if _within(name, part):
                found += [f"{i.source} imports {i.target} at line {i.line}: {part} must not import {b}"
                          for i in imports_of(name, path, set(files)) for b in banned if _within(i.target, b)]
    return found


def circles(root: str, package: str) -> list[set[str]]:
    """The sets of the package's modules that import each other in a circle when imports inside functions
    count too (the circle closes only once the function runs, so it is no import error, but a knot)."""
    files = modules(root, package)
    g = nx.DiGraph()
    for name, path in files.items():
        g.add_edges_from((name, i.target) for i in imports_of(name, path, set(files))
                         if i.runs and i.target in files and i.target != name)
    return sorted((c for c in nx.strongly_connected_components(g) if len(c) > 1), key=sorted)


def test_the_source_tree_is_layered():
    found = layering_violations(ROOT)
    assert not found, "\n".join(found)


def test_the_worlds_core_imports_none_of_its_plug_ins():
    """pkbsim/world runs whatever plug-ins are registered (world/plugins.py); it imports neither them nor
    pkbsim/plugins.py, nor the screen and task runner above it. `pkb check`, taskrun.py and the tests'
    conftest.py register the plug-ins (world/check.py did, until issue 22)."""
    found = inner_violations(ROOT)
    assert not found, "\n".join(found)


def test_no_circle_even_through_function_local_imports():
    """No modules of a package import each other in a circle, not even where an import inside a function
    closes it (a knot: neither module can be read or moved without the other). The knots there were, and what
    opened them: device/lower_symm -> symm/handle -> device/protocol -> device/memory_map -> symm/handle,
    symm/allocations.py; symm/api <-> world/ops_mode, the world's plug-ins (world/plugins.py); the screen's
    candidate process and the stages that start it (candidate_side, functional, isolation), screen/plain.py;
    in the shell, main <-> cli/_sandbox (the sandboxed screen's verdict of last resort parsed its command line
    with main's parser): the screen's own parser, the commands' sandbox flags in cli/_arguments.py."""
    found = {package: circles(ROOT, package) for package in OURS}
    assert found == {package: [] for package in OURS}, found


def test_the_shells_library_part_imports_no_command():
    """pkb/batch, pkb/report, pkb/resolve and pkb/errors are what the commands call: they import no module of
    pkb/cli. (pkb/corpus reads its headers' `pkb check` flags with that command's own parser.)"""
    files = modules(ROOT, "pkb")
    found = [f"{i.source} imports {i.target} at line {i.line}"
             for name, path in files.items() if not name.startswith("pkb.cli") and name != "pkb.corpus"
             for i in imports_of(name, path, set(files)) if i.target.startswith("pkb.cli")]
    assert not found, found


def test_no_command_imports_another():
    """Each `pkb` subcommand (pkb/cli/*_cmd.py) is parsing and rendering over the shell's library part and
    the shared helpers of pkb/cli (_arguments, _sandbox, _table, ...); main.py finds them by name."""
    files = modules(ROOT, "pkb")
    found = [f"{i.source} imports {i.target} at line {i.line}"
             for name, path in files.items() if name.endswith("_cmd")
             for i in imports_of(name, path, set(files)) if i.target.endswith("_cmd") and i.target != name]
    assert not found, found


def test_every_package_of_ours_is_checked():
    """A new top-level package of ours gets a rule here, or it escapes the check."""
    ours = {d for d in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, d, "__init__.py"))}
    assert ours - {"tests", "benchmarks", "topologies"} == set(FORBIDDEN)


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_buggy_twin_a_forbidden_import_and_a_module_level_cycle_are_reported(tmp_path):
    _write(tmp_path, {
        "tasks/__init__.py": "",
        "tasks/api.py": "import torch\nfrom tasks import registry\n",
        "tasks/registry.py": "def get():\n    from pkbsim.world import launcher\n",        # tasks -> pkbsim
        "candidate_sandbox/__init__.py": "import importlib\ndef run():\n"
                                         "    importlib.import_module('pkb.cli.main')\n",  # sandbox -> shell
        "pkbsim/__init__.py": "",
        "pkbsim/world/__init__.py": "",
        "pkbsim/world/launcher.py": "from ..symm import handle\n",                       # cycle: launcher
        "pkbsim/symm/__init__.py": "",
        "pkbsim/symm/handle.py": "from pkbsim.device.protocol import emit\n",            # -> handle -> protocol
        "pkbsim/device/__init__.py": "",
        "pkbsim/device/protocol.py": "from pkbsim.world import launcher\nimport hwbackend.score\n",  # -> launcher
        "hwbackend/__init__.py": "",
        "hwbackend/score.py": "import tasks.api\nfrom candidate_sandbox import run\n",
        "pkb/__init__.py": "",
        "pkb/main.py": "import pkbsim.world.launcher\nfrom hwbackend import score\nfrom pkb import store\n"
                       "def run():\n    from pkbsim.screen.result import Verdict\n",  # past the front doors
        "pkb/store.py": "from pkb.main import run\n",                                    # cycle: main -> store
    })
    found = layering_violations(str(tmp_path))
    assert any(f.startswith("tasks.registry imports pkbsim.world.launcher (inside a function)") for f in found)
    assert any(f.startswith("candidate_sandbox imports pkb.cli.main (inside a function)") for f in found)
    assert any(f.startswith("pkbsim.device.protocol imports hwbackend.score at line 2") for f in found)
    cycles = [f for f in found if f.startswith("import cycle in pkbsim")]
    assert len(cycles) == 1 and all(m in cycles[0] for m in ("pkbsim.world.launcher", "pkbsim.symm.handle",
                                                            "pkbsim.device.protocol"))
    doors = [f for f in found if "only through its front door" in f]
    assert sorted(f.split(" at ")[0] for f in doors) == [
        "pkb.main imports hwbackend.score", "pkb.main imports pkbsim.screen.result (inside a function)",
        "pkb.main imports pkbsim.world.launcher"], doors
    assert [f for f in found if f.startswith("import cycle in pkb ")] == [
        "import cycle in pkb at module level: pkb.main (line 3) -> pkb.store (line 1) -> pkb.main"]
    assert len(found) == 8, found  # hwbackend imports only what it may
    inner = inner_violations(str(tmp_path))  # and the world's core imports a plug-in
    assert inner == ["pkbsim.world.launcher imports pkbsim.symm.handle at line 1: pkbsim.world must not import "
                     "pkbsim.symm"], inner


def test_honest_twin_a_function_local_circle_and_a_type_checking_import_are_no_cycle(tmp_path):
    _write(tmp_path, {
        "tasks/__init__.py": "",
        "candidate_sandbox/__init__.py": "",
        "hwbackend/__init__.py": "",
        "pkb/__init__.py": "",
        "pkb/main.py": "import pkbsim\nfrom hwbackend import ScoreStore\ndef run():\n    from pkbsim import Verdict\n",
        "pkbsim/__init__.py": "",
        "pkbsim/a.py": "from pkbsim import b\n",
        "pkbsim/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkbsim import a\n"
                       "def f():\n    from pkbsim import c\n",
        "pkbsim/c.py": "from . import a\n",
    })
    assert layering_violations(str(tmp_path)) == []
    assert circles(str(tmp_path), "pkbsim") == [{"pkbsim.a", "pkbsim.b", "pkbsim.c"}]  # the knot is still seen
