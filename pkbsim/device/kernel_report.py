"""What a finished kernel launch leaves behind, whichever interpreter ran it: a compute record with the work it
did (pkbsim.timing.device_kernel times it) and, if a program/block waited for a later one, a co-residency
finding."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pkbsim.world.findings import Finding

SECTOR = 32   # bytes: the unit in which a GPU's L2 and HBM move data (sector_bytes shifts by 5)


def sector_bytes(addrs: np.ndarray, width: int, aligned: bool = False, bounds: tuple[int, int] | None = None) -> int:
    """Bytes of the 32-byte sectors that accesses of `width` bytes at `addrs` touch: a warp reading every 8th
    float moves whole sectors, 8x the bytes it uses. `aligned`: each address is a multiple of `width`, so an
    access of a power of two up to a sector lies in one sector (its first byte's). `bounds`: the least and
    greatest address, if known."""
    a = np.asarray(addrs).reshape(-1)
    if aligned and a.size and not width & (width - 1) and width <= SECTOR:
        a = a.view(np.int64) if a.dtype == np.uint64 else a.astype(np.int64)
        first = a >> 5   # SECTOR
        lo, hi = (bounds[0] >> 5, bounds[1] >> 5) if bounds else (int(first.min()), int(first.max()))
        if lo == hi:
            return SECTOR
        if hi - lo + 1 > 4 * a.size + 64:
            return int(np.unique(first).size) * SECTOR
        touched = np.zeros(hi - lo + 1, dtype=bool)
        touched[first - lo] = True
        return int(np.count_nonzero(touched)) * SECTOR
    a = a.astype(np.int64)
    if not a.size:
        return 0
    first, last = a // SECTOR, (a + width - 1) // SECTOR
    lo = bounds[0] // SECTOR if bounds else int(first.min())
    span = ((bounds[1] + width - 1) // SECTOR if bounds else int(last.max())) - lo + 1
    if span > 4 * a.size + 64:   # scattered: count them by sorting
        return int(np.unique(np.concatenate((first, last)) if width > 1 else first).size) * SECTOR
    touched = np.zeros(span, dtype=bool)   # a warp's or a block's accesses lie close: mark them, no sort
    touched[first - lo] = True
    if width > 1:
        touched[last - lo] = True
    return int(np.count_nonzero(touched)) * SECTOR


CHAIN_STEPS = ("awaited_atomics", "broadcast_atomics", "ready_polls", "sys_fences", "gpu_fences")  # chain_step


@dataclass
class KernelWork:
    """The work of one launch on one rank, counted from the interpreter's access records. Polls (spin-wait
    reads and atomics that change nothing) are not traffic: how often the simulator polls depends on its own
    schedule, not on the kernel; a wait is counted once, as a flag hop, when the value it waited for arrives."""
    bytes_read: int = 0            # payload bytes, every memory
    bytes_written: int = 0
    peer_read: dict[int, int] = field(default_factory=dict)    # payload bytes from/to each peer's memory
    peer_write: dict[int, int] = field(default_factory=dict)
    local_read: int = 0            # sector bytes in the rank's own memory (HBM traffic)
    local_write: int = 0
    load_ops: int = 0              # block-level data loads (a tl.load, a PTX ld per CTA) of more than one sector a block
    broadcast_loads: int = 0       # loads of one sector a block that missed its cache (count_load): not data-sized
    store_ops: int = 0             # block-level data stores (flag and signal-pad stores not counted)
    atomics: int = 0               # value-returning atomic updates that changed memory (lanes; PTX atom, Triton)
    reductions: int = 0            # fire-and-forget ones (PTX red: an atomicAdd whose result is unused)
    atomic_hot: int = 0            # the most atomics on one address
    reduction_hot: int = 0         # the most reductions on one address
    atomic_hot_shared: bool = False      # that address took updates from several blocks (a counter, not a slot)
    reduction_hot_shared: bool = False
    local_hops: int = 0            # longest chain of flag waits among the launch's own blocks
    remote_waits: int = 0          # the most waits for a peer's write that one block completed
    waits_on: set[int] = field(default_factory=set)   # peers whose writes the launch waited for
    warp_instructions: int = 0     # PTX only (Triton's interpreter counts none)
    polled: bool = False           # some block spun (its instruction count includes the simulator's spins)
    reads_grid_size: bool = False  # the code reads the grid's size (%nctaid, tl.num_programs): a grid-stride loop
    threads: int = 128             # per block
    _hits: dict = field(default_factory=dict, repr=False)
    _cached: dict = field(default_factory=dict, repr=False)   # block -> one-sector addresses in its L1
    _chain: dict = field(default_factory=dict, repr=False)    # (block, one of CHAIN_STEPS) -> steps it took
    _unfenced: set = field(default_factory=set, repr=False)   # blocks that wrote since their last fence

    def count_load(self, block, addr: int, sectors_per_block: int, blocks: int = 1) -> None:
        """A block-level load by `blocks` blocks. A load of one sector a block (a pointer from a table, a scalar
        every thread reads) costs its round trip the first time the block reads it and hits the SM's cache after
        that, until the block's next atomic, acquire or fence; it does not grow with the data. Counted as a data
        load each time, a 4-block one-shot all-reduce re-reading its peer pointers every iteration was
        predicted 84 ms against 28 ms on an H200."""
        if sectors_per_block > SECTOR:
            self.load_ops += blocks
            return
        seen = self._cached.setdefault(block, set())
        if addr not in seen:
            seen.add(addr)
            self.broadcast_loads += blocks

    def synchronised(self, block) -> None:
        """The block ran an atomic, an acquire or a fence: its cached words are read again from L2."""
        self._cached.pop(block, None)

    def chain_step(self, block, step: str) -> None:
        """A step on `block`'s chain that waits a latency no bandwidth hides (pkbsim.timing.device_kernel:
        memory_us times the atomics, sync_us the rest), one of CHAIN_STEPS:
        - awaited_atomics: an atomic whose old value the issuing thread waits for (an inline-CUDA `atom` that
          is a CAS, an exchange or ordered; a relaxed one of a reducible op is taken as a fire-and-forget RED,
          ptx_memory._reduction): a round trip to the L2;
        - broadcast_atomics: a Triton scalar atomic, whose old value Triton hands to every thread of the program
          through shared memory behind a barrier, so the whole program waits that round trip;
        - ready_polls: a flag wait's first read of a word (FlagChains.poll): a round trip even where the flag is
          already set;
        - sys_fences: a system-scope fence (membar.sys, fence.*.sys, or the one a .sys release store or atomic
          carries: KernelWork.released) with writes to wait for (KernelWork.fence);
        - gpu_fences: the same at GPU scope (__threadfence(): membar.gl, fence.*.gpu)."""
        key = (block, step)
        self._chain[key] = self._chain.get(key, 0) + 1

    def wrote(self, block) -> None:
        """`block` wrote memory (a store, a multimem store, an atomic that changed it): its next fence waits."""
        self._unfenced.add(block)

    def fence(self, block, step: str) -> None:
        """A fence of `block` (sys_fences or gpu_fences): it waits until the block's writes since its last fence
        are visible at its scope, so it is a chain step only where there are some (device_kernel.SYS_FENCE_US
        and GPU_FENCE_US were measured after a store; a barrier's entry fence, before the kernel wrote
        anything, has nothing to wait for)."""
        if block in self._unfenced:
            self._unfenced.discard(block)
            self.chain_step(block, step)

    def released(self, block, system: bool) -> None:
        """A release store or atomic of `block` (PTX: a fence, then the access): at system scope it carries a
        system fence; at GPU scope (Triton's default atomics among them) it is not counted, a 1-block Triton
        two-shot with six took less than the model gave without them."""
        if system:
            self.fence(block, "sys_fences")

    def longest_chain(self, step: str) -> int:
        """The most steps of one kind that one block took, one after another."""
        return max((n for (_, s), n in self._chain.items() if s == step), default=0)

    def atomic(self, addrs: np.ndarray, block, returns: bool = True, combined: bool = False) -> None:
        """Lanes of `block` that updated memory atomically at `addrs` (one entry per lane). `combined`: one
        instruction's lanes on one address are one update there (Triton's vector atomics, as measured on an
        H200: benchmarks/results/device_kernel_model_check_h200.json)."""
        uniq, counts = np.unique(np.asarray(addrs).astype(np.int64).reshape(-1), return_counts=True)
        kind = "atomic" if returns else "reduction"
        if returns:
            self.atomics += int(counts.sum())
        else:
            self.reductions += int(counts.sum())
        for a, n in zip(uniq.tolist(), counts.tolist()):
            hits, first, shared = self._hits.get((kind, a), (0, block, False))
            hits, shared = hits + (1 if combined else n), shared or first != block
            self._hits[(kind, a)] = (hits, first, shared)
            if hits > getattr(self, f"{kind}_hot"):
                setattr(self, f"{kind}_hot", hits)
                setattr(self, f"{kind}_hot_shared", shared)
            elif hits == getattr(self, f"{kind}_hot") and shared:
                setattr(self, f"{kind}_hot_shared", True)

    def record(self, blocks: int) -> dict:
        """The trace's `device` field (JSON-able)."""
        return {"blocks": blocks, "threads": self.threads, "local_read": self.local_read,
                "peer_read": sum(self.peer_read.values()),
                "local_write": self.local_write, "load_ops": self.load_ops, "broadcast_loads": self.broadcast_loads,
                "store_ops": self.store_ops,
                "atomics": self.atomics, **{step: self.longest_chain(step) for step in CHAIN_STEPS},
                "atomic_hot": self.atomic_hot, "reductions": self.reductions, "reduction_hot": self.reduction_hot,
                "atomic_hot_shared": self.atomic_hot_shared, "reduction_hot_shared": self.reduction_hot_shared, "local_hops": self.local_hops, "remote_waits": self.remote_waits,
                "waits_on": sorted(self.waits_on), "warp_instructions": self.warp_instructions,
                "polled": self.polled, "reads_grid_size": self.reads_grid_size}


@dataclass
class FlagChains:
    """Flag waits of one launch as hops on a chain: a block that waited for a write made by another block of
    the launch is one hop behind that block's chain (a ping-pong of n rounds is 2n hops, a barrier that every
    block passes on one flag is one); a wait for a peer rank's write is one remote wait."""
    seen: dict = field(default_factory=dict)    # (block, address) -> bytes it last read there
    stamp: dict = field(default_factory=dict)   # address -> (block, value, its chain depth) of the last write
    depth: dict = field(default_factory=dict)   # block -> its chain depth
    remote: dict = field(default_factory=dict)  # block -> peer writes it waited for

    def poll(self, work: KernelWork, block, addrs: list[int]) -> None:
        """One poll instruction of `block` over the flag words `addrs`, before FlagChains.read sees its values:
        its first read of any of them is a round trip on the block's chain, even where the flag is already set
        and the wait passes at once; its later reads there are the simulator's spinning, not the kernel's."""
        if any((block, a) not in self.seen for a in addrs):
            work.chain_step(block, "ready_polls")

    def read(self, work: KernelWork, block, addr: int, value: bytes, peers: set[int]) -> None:
        """A poll (or the read half of an atomic) by `block` saw `value` at `addr`: if that changed since its last
        read there, its wait ended, on a write of another block of the launch (the value it stamped) or else of
        a peer rank."""
        prev = self.seen.get((block, addr))
        self.seen[(block, addr)] = value
        if prev is None or prev == value:
            return
        writer = self.stamp.get(addr)
        if writer is not None and writer[0] != block and writer[1] == value:
            self.depth[block] = max(self.depth.get(block, 0), writer[2] + 1)
            work.local_hops = max(work.local_hops, self.depth[block])
        else:
            self.remote[block] = self.remote.get(block, 0) + 1
            work.remote_waits = max(work.remote_waits, self.remote[block])
            work.waits_on |= peers

    def wrote(self, block, addr: int, value: bytes) -> None:
        self.seen[(block, addr)] = value
        self.stamp[addr] = (block, value, self.depth.get(block, 0))


def report_launch(ctx, name: str, site: str, units: int, unit: str, work: KernelWork, co_resident: list[str],
                  kernel: str) -> None:
    if co_resident:
        ctx.world.add_finding(Finding(
            "co_residency", f"{name} launched at {site} relies on co-residency: a {unit} waits for a later "
            f"{unit} of the same launch, which a GPU runs only if every {unit} is resident at once (use one "
            f"{unit} per rank's work, a cooperative launch, or split the kernel)", [ctx.rank], [site],
            co_resident[:4]))
    fields = {"flops": 0, "bytes_read": work.bytes_read, "bytes_written": work.bytes_written, "kernel": kernel,
              "programs": units, "device": work.record(units)}
    if work.peer_read or work.peer_write:
        fields["peer_bytes"] = {"read": dict(work.peer_read), "write": dict(work.peer_write)}
    ctx.trace.record("compute", name, site, stream=ctx.stream_id, **fields)
