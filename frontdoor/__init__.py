"""A library's front door: the names it exports to the shell, each imported from its module when first asked
for (PEP 562's module `__getattr__`), so that `from pkbsim import ScreenResult` loads the result types and not
torch, and a command's parser reads a library's defaults without loading the library.

pkbsim/__init__.py and hwbackend/__init__.py each build one. It is a package of its own, importing nothing of
ours, because both libraries use it and neither may import the other or the shell (tests/test_layering.py).
"""
from __future__ import annotations

import importlib


class FrontDoor:
    """The exports of `library`: public name -> (module, its name there)."""

    def __init__(self, library: str):
        self.library = library
        self._exports: dict[str, tuple[str, str]] = {}

    def export(self, module: str, names: str, **renamed: str) -> None:
        """Export `names` (space-separated) of `module` under their own names, and each `public=own` renamed."""
        self._exports.update({n: (module, n) for n in names.split()})
        self._exports.update({public: (module, own) for public, own in renamed.items()})

    def names(self, *defined: str) -> list[str]:
        """The library's `__all__`: every export and the names its `__init__` defines itself."""
        return sorted([*self._exports, *defined])

    def getattr(self, name: str):
        """The library's module `__getattr__`. The object is not kept in the library's namespace, so a test's
        patch of its module is seen."""
        if name not in self._exports:
            raise AttributeError(f"module {self.library!r} has no attribute {name!r}")
        module, own = self._exports[name]
        return getattr(importlib.import_module(module), own)

    def dir(self, namespace: dict) -> list[str]:
        """The library's module `__dir__` (given its namespace): what it holds and what it exports."""
        return sorted(set(namespace) | set(self._exports))
