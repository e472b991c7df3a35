"""Per-rank process state that Python keeps per process: os.environ and stdout.

torchrun gives each rank its own RANK/LOCAL_RANK/WORLD_SIZE/MASTER_* environment and its own stdout;
here all ranks share one process, so `os.environ` becomes a view with a per-rank overlay and
`sys.stdout`/`sys.stderr` prefix each line with the rank that printed it (like `torchrun --tee`).
"""
from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import MutableMapping

from pkbsim.world.context import current

_DELETED = object()


def torchrun_env(rank: int, world_size: int, nproc_per_node: int, master_port: int = 29500) -> dict[str, str]:
    return {
        "RANK": str(rank), "LOCAL_RANK": str(rank % nproc_per_node), "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(nproc_per_node), "GROUP_RANK": str(rank // nproc_per_node),
        "NODE_RANK": str(rank // nproc_per_node), "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master_port), "TORCHELASTIC_RUN_ID": "pkbsim",
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
    }


class RankEnviron(MutableMapping):
    """os.environ with the calling rank's overlay on top of the real environment."""

    def __init__(self, base):
        self._base = base

    def _overlay(self) -> dict | None:
        ctx = current()
        return ctx.extra.get("env") if ctx else None

    def __getitem__(self, key):
        ov = self._overlay()
        if ov is not None and key in ov:
            if ov[key] is _DELETED:
                raise KeyError(key)
            return ov[key]
        return self._base[key]

    def __setitem__(self, key, value):
        ov = self._overlay()
        if ov is None:
            self._base[key] = value
        else:
            ov[key] = str(value)

    def __delitem__(self, key):
        ov = self._overlay()
        if ov is None:
            del self._base[key]
        elif key in self:
            ov[key] = _DELETED
        else:
            raise KeyError(key)

    def _keys(self) -> list:
        ov = self._overlay() or {}
        keys = [k for k in self._base if ov.get(k) is not _DELETED]
        return keys + [k for k, v in ov.items() if k not in self._base and v is not _DELETED]

    def __iter__(self):
        return iter(self._keys())

    def __len__(self):
        return len(self._keys())

    def copy(self) -> dict:
        return dict(self)


class RankPrefixedStream(io.TextIOBase):
    """Writes each complete line of a rank thread as '[rank N] line' to the underlying stream."""

    def __init__(self, target):
        self._target = target
        self._partial = threading.local()
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        ctx = current()
        if ctx is None:
            return self._target.write(s)
        buf = getattr(self._partial, "buf", "") + s
        *lines, rest = buf.split("\n")
        self._partial.buf = rest
        if lines:
            with self._lock:
                self._target.write("".join(f"[rank {ctx.rank}] {line}\n" for line in lines))
        return len(s)

    def flush(self) -> None:
        ctx = current()
        rest = getattr(self._partial, "buf", "")
        if ctx is not None and rest:
            self._partial.buf = ""
            with self._lock:
                self._target.write(f"[rank {ctx.rank}] {rest}\n")
        self._target.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self):
        return getattr(self._target, "encoding", "utf-8")


def install_environ(patches, program_output) -> None:
    """Give ranks their own environment and route their output, prefixed, to program_output."""
    patches.set(os, "environ", RankEnviron(os.environ))
    patches.set(sys, "stdout", RankPrefixedStream(program_output))
    patches.set(sys, "stderr", RankPrefixedStream(sys.stderr if program_output is sys.stdout else program_output))
