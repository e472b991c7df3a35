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
        return ctx.env if ctx else None

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


OUTPUT_LIMIT = 8 << 20  # characters of program output kept per run: a program printing 100 MB per call is not
#                         buffered whole (the screen keeps the output in memory)


class RankPrefixedStream(io.TextIOBase):
    """Writes each complete line of a rank thread as '[rank N] line' to the underlying stream, up to
    OUTPUT_LIMIT characters; past it, one line says that the rest is dropped."""

    def __init__(self, target, limit: int | None = None):
        self._target = target
        self._partial = threading.local()  # the rank's unfinished line: a list of pieces (joined once it ends)
        self._lock = threading.Lock()
        self._left = OUTPUT_LIMIT if limit is None else limit

    def write(self, s: str) -> int:
        ctx = current()
        if ctx is None:
            return self._target.write(s)
        if self._left <= 0 or ctx.gone:
            return len(s)
        pieces = getattr(self._partial, "pieces", None)
        if pieces is None:
            pieces = self._partial.pieces = []
            self._partial.size = 0
        if "\n" not in s:
            pieces.append(s)
            self._partial.size += len(s)
            if self._partial.size > self._left:  # a line that never ends: kept no longer than the limit
                self._emit(f"[rank {ctx.rank}] {''.join(pieces)}\n")
                pieces.clear()
                self._partial.size = 0
            return len(s)
        *lines, rest = ("".join(pieces) + s).split("\n")
        pieces[:] = [rest] if rest else []
        self._partial.size = len(rest)
        self._emit("".join(f"[rank {ctx.rank}] {line}\n" for line in lines))
        return len(s)

    def _emit(self, text: str) -> None:
        with self._lock:
            if self._left <= 0:
                return
            kept = text[:self._left]
            self._left -= len(kept)
            self._target.write(kept)
            if len(kept) < len(text):
                self._target.write(f"\n[pkb] program output beyond {OUTPUT_LIMIT >> 20} MiB is dropped\n")

    def flush(self) -> None:
        ctx = current()
        pieces = getattr(self._partial, "pieces", None)
        if ctx is not None and pieces and not ctx.gone:
            rest = "".join(pieces)
            pieces.clear()
            self._partial.size = 0
            self._emit(f"[rank {ctx.rank}] {rest}\n")
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
