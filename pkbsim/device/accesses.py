"""One interpreted memory access seen by the protocol layer: its bytes, the symmetric region they fall in
(a rank's buffer or signal pad, or None for other memory), and how it becomes an IR event, a poll label
and per-peer byte counts. Shared by the Triton and the PTX (inline CUDA) paths."""
from __future__ import annotations

import ctypes

import numpy as np

from pkbsim.device.ir import Event
from pkbsim.device.kernel_report import KernelWork, sector_bytes
from pkbsim.device.protocol import device_state, emit_data


def byte_runs(starts, width: int, aligned: bool = False, bounds: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """The byte ranges [lo, hi) that accesses of `width` bytes at `starts` cover, merged where they touch: a warp
    or a Triton block that touches every k-th word (its own slots of an interleaved or column-sliced buffer)
    must not be taken for one that also touches the words between, which other ranks may write. `aligned`: every
    start is a multiple of `width`, a power of two (the PTX interpreter checked it), so items are marked, not bytes.
    `bounds`: the least and greatest start, if known."""
    if aligned and not width & (width - 1):
        return _aligned_runs(np.asarray(starts).reshape(-1), width, bounds)
    a = np.asarray(starts).astype(np.int64).reshape(-1)
    lo, hi = bounds or (int(a.min()), int(a.max()))
    span = hi - lo + width
    # close together (a warp's, a block's) and narrow: mark the bytes, no sort (a wide run, a whole row, would
    # build an index of 8 bytes per byte covered)
    if span <= 8 * width * a.size + 4096 and width <= 16:
        touched = np.zeros(span + 2, dtype=np.int8)
        touched[1 + (a - lo)[:, None] + np.arange(width)] = 1
        edges = np.diff(touched)
        return list(zip((lo + np.nonzero(edges == 1)[0]).tolist(), (lo + np.nonzero(edges == -1)[0]).tolist()))
    a = np.unique(a)
    cut = np.nonzero(np.diff(a) > width)[0]
    return list(zip(np.concatenate((a[:1], a[cut + 1])).tolist(), (np.concatenate((a[cut], a[-1:])) + width).tolist()))


def _aligned_runs(a: np.ndarray, width: int, bounds: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """byte_runs of starts that are multiples of `width` (a power of two): one mark per item."""
    a = a.view(np.int64) if a.dtype == np.uint64 else a.astype(np.int64)   # addresses are below 2**63
    lo, hi = bounds or (int(a.min()), int(a.max()))
    if lo == hi:   # every lane at one address (a scalar from a table)
        return [(lo, lo + width)]
    shift = width.bit_length() - 1
    span = ((hi - lo) >> shift) + 1
    if span > 8 * a.size + 4096:   # scattered: sort
        u = np.unique(a)
        cut = np.nonzero(np.diff(u) > width)[0]
        return list(zip(np.concatenate((u[:1], u[cut + 1])).tolist(), (np.concatenate((u[cut], u[-1:])) + width).tolist()))
    touched = np.zeros(span + 2, dtype=np.int8)
    touched[1 + ((a - lo) >> shift)] = 1
    edges = np.diff(touched)
    return list(zip((lo + (np.nonzero(edges == 1)[0] << shift)).tolist(),
                    (lo + (np.nonzero(edges == -1)[0] << shift)).tolist()))


class Access:
    def __init__(self, ctx, lo: int, hi: int, nbytes: int, region, runs: list[tuple[int, int]] | None = None,
                 sectors: int | None = None):
        self.lo, self.hi, self.nbytes, self.region = lo, hi, nbytes, region
        self.runs = runs  # the contiguous byte ranges within [lo, hi) it touches (None: all of it)
        self.sectors = nbytes if sectors is None else sectors  # bytes of the 32-byte sectors it touches
        self.rank, self.world_size, self.call = ctx.rank, ctx.world.size, getattr(ctx, "call", 0)

    @classmethod
    def find(cls, ctx, lo: int, hi: int, nbytes: int) -> Access:
        return cls(ctx, lo, hi, nbytes, device_state(ctx.world).memory.find(lo, hi))

    @classmethod
    def of(cls, ctx, addrs: np.ndarray, width: int, region, runs=None, aligned: bool = False,
           bounds: tuple[int, int] | None = None) -> Access:
        """The access of `width` bytes at each of `addrs` (all in `region`); `aligned` and `bounds` as byte_runs."""
        lo, hi = bounds or (int(addrs.min()), int(addrs.max()))
        return cls(ctx, lo, hi + width, int(addrs.size) * width, region, runs, sector_bytes(addrs, width, aligned, bounds))

    def emit_data(self, world, kind: str, site: str, where: str) -> None:
        """The race-checked get/put events of a data access of a symmetric buffer, one per contiguous run (the race
        check takes the runs together: protocol.emit_data)."""
        emit_data(world, kind, self.rank, site, where, self.region, self.runs or [(self.lo, self.hi)], self.call)

    def event(self, kind: str, site: str, where: str, **kw) -> Event:
        r = self.region
        if r is None:
            return Event(kind, self.rank, site, where, **kw)
        if r.on_pad:
            word = (self.lo - r.base) // 4
            return Event(kind, self.rank, site, where, r.owner, word, word + 1, True, **kw)
        return Event(kind, self.rank, site, where, r.owner, self.lo - r.base, self.hi - r.base, call=self.call, **kw)

    @property
    def peer(self) -> int | None:
        """The rank whose memory this is, if not the accessing rank's own."""
        r = self.region
        return r.owner if r is not None and r.owner != self.rank else None

    def count(self, work: KernelWork, write: bool) -> None:
        """Add the access's bytes to the launch's work: payload, and sectors of local memory or payload per peer."""
        if write:
            work.bytes_written += self.nbytes
        else:
            work.bytes_read += self.nbytes
        peer = self.peer
        if peer is None:
            if write:
                work.local_write += self.sectors
            else:
                work.local_read += self.sectors
        else:
            bucket = work.peer_write if write else work.peer_read
            bucket[peer] = bucket.get(peer, 0) + self.nbytes

    def label(self) -> str:
        r = self.region
        if r is None:
            return f"address 0x{self.lo:x} (rank {self.rank}'s local memory)"
        if not r.on_pad:
            return f"rank {r.owner} symmetric buffer, byte {self.lo - r.base}"
        word = (self.lo - r.base) // 4
        return f"rank {r.owner} signal pad, channel {word // self.world_size}, slot {word}"

    def writers(self) -> set[int]:
        """The ranks whose write this poll waits for (a pad slot names its source rank)."""
        r = self.region
        if r is None:
            return set()
        if r.on_pad:
            src = ((self.lo - r.base) // 4) % self.world_size
            return {src} if src != self.rank else set()
        return {r.owner} if r.owner != self.rank else set()

    def snapshot(self) -> bytes:
        return ctypes.string_at(self.lo, self.hi - self.lo)
