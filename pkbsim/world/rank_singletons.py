"""Process-wide registries of third-party libraries, one per rank.

Each torchrun rank is a process with its own copy of every module-level registry; here the ranks share one
process, so a library that keeps "the one instance" in a class attribute sees the second rank as a second
initialisation (hydra: "GlobalHydra is already initialized"). For the libraries listed, that attribute
becomes a mapping in which the instances of the named classes are kept per rank for the length of a run
(registries filled once at import time, such as hydra's ConfigStore, stay shared, as a rank that imports a
module second does not run its import-time code again).

A class-level list that a context manager uses as a stack (push on enter, pop on exit, "the active ones" read
in between: tyro's ConstructorRegistry, which torchtitan's config parser enters) is the same problem in
another shape: two ranks inside it at once pop each other's entries. Each listed stack becomes a list per
rank, which starts as a copy of what the process had pushed before the run.
"""
from __future__ import annotations

import importlib
import importlib.util
from collections.abc import MutableMapping, MutableSequence

from pkbsim.world.context import current
from pkbsim.world.patching import Patches

# (module, class, attribute mapping classes to their one instance, the classes whose instance is per rank)
REGISTRIES = (("hydra.core.singleton", "Singleton", "_instances", ("GlobalHydra", "HydraConfig")),)
# (module, class, attribute holding a class-level stack)
STACKS = (("tyro.constructors._registry", "ConstructorRegistry", "_active_registries"),)


class PerRankInstances(MutableMapping):
    """class -> instance, with the instances of `per_rank` classes kept apart per rank (the calling thread's)."""

    def __init__(self, shared: dict, per_rank: tuple[str, ...]):
        self._shared, self._per_rank, self._ranks = shared, per_rank, {}

    def _for(self, key) -> dict:
        ctx = current()
        if ctx is None or getattr(key, "__name__", None) not in self._per_rank:
            return self._shared
        return self._ranks.setdefault(ctx.rank, {})

    def _visible(self) -> dict:
        ctx = current()
        return {**self._shared, **(self._ranks.get(ctx.rank, {}) if ctx else {})}

    def __getitem__(self, key):
        return self._for(key)[key]

    def __setitem__(self, key, value):
        self._for(key)[key] = value

    def __delitem__(self, key):
        del self._for(key)[key]

    def __iter__(self):
        return iter(self._visible())

    def __len__(self):
        return len(self._visible())


class PerRankStack(MutableSequence):
    """A list per rank (the calling thread's), each a copy of `shared` when its rank first reads it; outside a
    rank, `shared` itself."""

    def __init__(self, shared: list):
        self._shared, self._ranks = shared, {}

    def _list(self) -> list:
        ctx = current()
        if ctx is None:
            return self._shared
        if ctx.rank not in self._ranks:
            self._ranks[ctx.rank] = list(self._shared)
        return self._ranks[ctx.rank]

    def __getitem__(self, i):
        return self._list()[i]

    def __setitem__(self, i, value):
        self._list()[i] = value

    def __delitem__(self, i):
        del self._list()[i]

    def __len__(self):
        return len(self._list())

    def insert(self, i, value):
        self._list().insert(i, value)


def _owner(module: str, cls: str):
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return None
    return getattr(importlib.import_module(module), cls)


def install_rank_singletons(patches: Patches) -> None:
    for module, cls, attr, per_rank in REGISTRIES:
        if (owner := _owner(module, cls)) is not None:
            patches.set(owner, attr, PerRankInstances(getattr(owner, attr), per_rank))
    for module, cls, attr in STACKS:
        if (owner := _owner(module, cls)) is not None:
            patches.set(owner, attr, PerRankStack(getattr(owner, attr)))
