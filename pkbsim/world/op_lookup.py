"""One Python object per torch op, whichever rank thread looks it up first.

torch builds an op's Python object (`torch.ops.aten._indices.default`) on its first lookup and keeps it as
an attribute of the op's packet; the first time a Python dispatch mode sees the op, C++ caches a borrowed
pointer to that object (c10::PyHandleCache). When two rank threads look the same op up at once, each
builds an object and the second replaces the first in the packet, which frees the first; if C++ cached
that one, every later call of the op under a mode reads freed memory. ParallelKernelBench problem 62's
reference died of SIGSEGV in torch._library.simple_registry.find_torch_dispatch_rule, or raised
"'UntypedStorage' object has no attribute '__qualname__'" there, in 3 of 9 screens, when its 8 ranks
first called a sparse tensor's `_indices()` together. Lookups are serialised here: the second thread
finds the first one's object.
"""
from __future__ import annotations

import threading

import torch._ops

_LOCK = threading.RLock()


def serialised(getattr_fn):
    """`getattr_fn` (a `__getattr__` that builds and caches an attribute) under one lock, returning what
    another thread cached meanwhile."""
    def __getattr__(self, key):
        with _LOCK:
            try:
                return object.__getattribute__(self, key)
            except AttributeError:
                return getattr_fn(self, key)
    __getattr__.serialised, __getattr__.__wrapped__ = True, getattr_fn
    return __getattr__


def install() -> None:
    """Serialise op lookups in this process (idempotent): op namespaces build packets, packets overloads."""
    for cls in (getattr(torch._ops, n, None) for n in ("_OpNamespace", "OpOverloadPacket")):
        if cls is not None and not getattr(cls.__getattr__, "serialised", False):   # private: may move
            cls.__getattr__ = serialised(cls.__getattr__)
