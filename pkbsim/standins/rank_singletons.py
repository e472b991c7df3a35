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

A process-wide table that a context manager fills on enter and empties on exit (DTensor's custom op handlers,
which `loss_parallel()` sets for the loss ops: torchtitan's tensor-parallel loss; torch's dispatcher reads it
as a plain dict) is filled by the first rank in and emptied by the last one out, where the second rank out
would find its entries gone (KeyError). While one rank is inside, the others see the entries too.

A class-level dict that every instance takes as its own `__dict__` (the "Borg" pattern: accelerate's
PartialState, AcceleratorState and GradientState) is one per rank, empty at each rank's start.

A class-level lock made on first use and deleted again by whoever made it (tqdm's `_lock`, which
`tqdm.contrib.concurrent`'s `ensure_lock` deletes on exit if it made it: the `datasets` loader that torchtitan
calls) vanishes under another rank that is using it. Each listed lock is made by pkb (before the run, or as the
program imports the library), so no rank is its maker.

Each library is patched only if imported, before the run or by the program during it (on_import.py).
"""
from __future__ import annotations

import threading
from collections.abc import MutableMapping, MutableSequence

from pkbsim.world.context import current
from pkbsim.standins.on_import import when_imported
from pkbsim.world.patching import Patches

# (module, class, attribute mapping classes to their one instance, the classes whose instance is per rank)
REGISTRIES = (("hydra.core.singleton", "Singleton", "_instances", ("GlobalHydra", "HydraConfig")),)
# (module, class, attribute holding a class-level stack)
STACKS = (("tyro.constructors._registry", "ConstructorRegistry", "_active_registries"),)
# (module, class, attribute holding the state its instances share)
SHARED_STATES = tuple(("accelerate.state", c, "_shared_state") for c in ("PartialState", "AcceleratorState",
                                                                          "GradientState"))
# (module, the function that fills a process-wide table, the one that empties it)
NESTED = (("torch.distributed.tensor.parallel.loss", "_enable_custom_loss_ops", "_disable_custom_loss_ops"),)
# (module, class, attribute holding a lock made on first use, the class method that makes it)
LAZY_LOCKS = (("tqdm.std", "tqdm", "_lock", "get_lock"),)


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


class PerRankDict:
    """A class attribute whose dict is one per rank (the calling thread's), empty at first; outside a rank, the
    one the class had."""

    def __init__(self, shared: dict):
        self._shared, self._ranks = shared, {}

    def __get__(self, obj, objtype=None):
        ctx = current()
        return self._shared if ctx is None else self._ranks.setdefault(ctx.rank, {})

    def __set__(self, obj, value):
        ctx = current()
        if ctx is None:
            self._shared = value
        else:
            self._ranks[ctx.rank] = value


class Nested:
    """An enable/disable pair that fills and empties a process-wide table, nested across ranks: the first rank
    in enables, the last one out disables."""

    def __init__(self, enable, disable):
        self._enable, self._disable, self._depth, self._lock = enable, disable, 0, threading.Lock()

    def enable(self):
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._enable()

    def disable(self):
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._disable()


def _registry(patches: Patches, cls: str, attr: str, per_rank: tuple[str, ...]):
    def then(module):
        owner = getattr(module, cls)
        patches.set(owner, attr, PerRankInstances(getattr(owner, attr), per_rank))
    return then


def _stack(patches: Patches, cls: str, attr: str):
    def then(module):
        owner = getattr(module, cls)
        patches.set(owner, attr, PerRankStack(getattr(owner, attr)))
    return then


def _shared_state(patches: Patches, cls: str, attr: str):
    def then(module):
        owner = getattr(module, cls)
        patches.set(owner, attr, PerRankDict(vars(owner)[attr]))
    return then


def _nested(patches: Patches, enable: str, disable: str):
    def then(module):
        pair = Nested(getattr(module, enable), getattr(module, disable))
        patches.set(module, enable, pair.enable)
        patches.set(module, disable, pair.disable)
    return then


def _lazy_lock(patches: Patches, cls: str, attr: str, make: str):
    def then(module):
        owner = getattr(module, cls)
        if attr in vars(owner):
            return
        lock = getattr(owner, make)()       # which may set it: the run's patch removes it again afterwards
        if attr in vars(owner):
            delattr(owner, attr)
        patches.set_own(owner, attr, lock)
    return then


def install_rank_singletons(patches: Patches) -> None:
    """Each listed library is patched when it is imported, before the run or by the program during it
    (on_import.py): importing them all at every world start cost seconds, and most programs use none."""
    for module, cls, attr, per_rank in REGISTRIES:
        when_imported(patches, module, _registry(patches, cls, attr, per_rank))
    for module, cls, attr in STACKS:
        when_imported(patches, module, _stack(patches, cls, attr))
    for module, cls, attr in SHARED_STATES:
        when_imported(patches, module, _shared_state(patches, cls, attr))
    for module, enable, disable in NESTED:
        when_imported(patches, module, _nested(patches, enable, disable))
    for module, cls, attr, make in LAZY_LOCKS:
        when_imported(patches, module, _lazy_lock(patches, cls, attr, make))
