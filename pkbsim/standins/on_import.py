"""Patches a run applies to a module only if the program imports it.

A world's patches of third-party libraries (hydra's singletons, DTensor's loss-parallel table, dynamo's stance)
were made at every world start by importing those libraries, which cost seconds of every start (DTensor pulls
in sympy: 1.5 s on a quiet 2-core machine, hydra 0.4 s), in the screening process and again in each of the
candidate's, though most programs import none of them. `when_imported` applies a patch now if the module is
already imported, else right after the program imports it during the run (its code has run, the import has not
returned, so no rank sees it unpatched: the other ranks wait on the module's import lock). Outside a run the
finder does nothing; it stays on sys.meta_path once added (one dictionary look-up per import).
"""
from __future__ import annotations

import importlib.abc
import sys
import threading
from collections.abc import Callable
from types import ModuleType

from pkbsim.world.patching import Patches


class _Loader(importlib.abc.Loader):
    """A module's own loader, with `then(module)` called once the module's code has run."""

    def __init__(self, loader, then: Callable[[ModuleType], None]):
        self._loader, self._then = loader, then

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._then(module)

    def __getattr__(self, name):    # get_source, get_filename, ... of the real loader
        return getattr(self._loader, name)


class _OnImport(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.pending: dict[str, tuple] = {}   # module name -> the running world's callbacks (restored with its patches)
        self._finding = threading.local()

    def find_spec(self, fullname, path, target=None):
        thens = self.pending.get(fullname)
        if not thens or getattr(self._finding, "on", False):
            return None
        self._finding.on = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._finding.on = False
        if spec.loader is not None:
            spec.loader = _Loader(spec.loader, lambda module: [then(module) for then in thens])
        return spec


_ON_IMPORT = _OnImport()


def when_imported(patches: Patches, name: str, then: Callable[[ModuleType], None]) -> None:
    """Call `then(module)` for module `name` now if it is imported, else when the running world imports it (for
    this run only: the entry goes with `patches`). `then` makes its own patches through `patches`."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
        return
    if _ON_IMPORT not in sys.meta_path:
        sys.meta_path.insert(0, _ON_IMPORT)
    patches.set_item(_ON_IMPORT.pending, name, (*_ON_IMPORT.pending.get(name, ()), then))
