"""Per-thread c10d state: each rank thread gets its own default group, group registry and counters.

torch.distributed keeps that state in `distributed_c10d._world` (and module globals behind it); for
the length of a run it is replaced by a view that gives every thread its own copy. (PyTorch's test
helper multi_threaded_pg does the same, but its copy lacks fields some torch versions read.)
"""
from __future__ import annotations

import threading

import torch.distributed.distributed_c10d as c10d


class _RankWorldData:
    def __init__(self) -> None:
        self.default_pg = None
        self.pg_map: dict = {}
        self.pg_names: dict = {}
        self.pg_group_ranks: dict = {}
        self.pg_backend_config: dict = {}
        self.group_count = 0
        self.tags_to_pg: dict = {}
        self.pg_to_tag: dict = {}
        self.pg_coalesce_state: dict = {}
        self.comms: list = []


class ThreadLocalWorld:
    _tls = threading.local()

    def _data(self) -> _RankWorldData:
        data = getattr(ThreadLocalWorld._tls, "data", None)
        if data is None:
            data = ThreadLocalWorld._tls.data = _RankWorldData()
        return data

    def __getattr__(self, name):
        data = self._data()
        if name in data.__dict__:
            return data.__dict__[name]
        prop = getattr(c10d._World, name, None)
        if isinstance(prop, property):  # derived views such as pg_config_info
            return prop.fget(self)
        raise AttributeError(name)

    def __setattr__(self, name, value) -> None:
        setattr(self._data(), name, value)


def install() -> object:
    """Swap in the per-thread world; returns the previous one for `uninstall`."""
    old = c10d._world
    c10d._world = ThreadLocalWorld()
    return old


def uninstall(old) -> None:
    c10d._world = old
    ThreadLocalWorld._tls = threading.local()
