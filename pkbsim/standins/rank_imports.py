"""A rank's failed import reports that rank's own error, as its own process would.

Ranks are threads sharing sys.modules. A thread importing a module another thread is initialising can be
handed the other's partial module once that import ends (CPython's `import` returns the object it found
before waiting on the module's lock; importlib's `_find_and_load` can skip the wait). If that import failed,
`from helper import Trainer` raises "cannot import name 'Trainer'" instead of the missing package: here
such a thread imports the module itself.
"""
from __future__ import annotations

import importlib._bootstrap as bootstrap
import sys

from pkbsim.errors import NotSimulated
from pkbsim.world.patching import Patches

_ABSENT = object()
# each stale module is another thread's failed import, so retries end once those threads have failed; the
# bound only guards against a module that something keeps deleting from sys.modules
_MAX_RETRIES = 100


def _rank_find_and_load(real):
    def _find_and_load(name, import_):
        module = real(name, import_)
        for _ in range(_MAX_RETRIES):
            if sys.modules.get(name, _ABSENT) is module:
                break
            module = real(name, import_)  # another thread's failed import left it: import it here
        return module
    return _find_and_load


def _rank_lock_unlock(real):
    def _lock_unlock_module(name):
        found = sys.modules.get(name, _ABSENT)  # what the caller found, and will return
        real(name)  # waits for the thread that is importing `name`
        if sys.modules.get(name, _ABSENT) is found:
            return
        # that import failed (a third thread's may be under way): this one raises this thread's own error
        bootstrap._gcd_import(name)
        # or it succeeded here, and the `import` statement still returns the partial module it found
        raise NotSimulated(f"module {name!r} failed to import on one rank and imported on another: ranks share "
                           f"one module in pkb, so an import must succeed or fail on all of them")
    return _lock_unlock_module


def install_rank_imports(patches: Patches) -> None:
    """For the length of a run, a thread whose import found another's failed one imports the module itself."""
    patches.set(bootstrap, "_find_and_load", _rank_find_and_load(bootstrap._find_and_load))
    patches.set(bootstrap, "_lock_unlock_module", _rank_lock_unlock(bootstrap._lock_unlock_module))
