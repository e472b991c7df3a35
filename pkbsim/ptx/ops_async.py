"""Hopper's asynchronous copies and transaction barriers: mbarrier.*, cp.async.bulk(.tensor), bulk groups.

mbarrier objects live in shared memory, 8 bytes each, in pkb's own encoding of the state the PTX ISA
defines (an mbarrier is opaque): bit 63 the current phase's parity, bit 62 "initialised", bits 41..60 the
expected arrival count, bits 21..40 the pending arrival count, bits 0..20 the transaction count (signed).
A phase completes when its pending count and its transaction count are both zero: the phase flips, the
pending count is reset to the expected count.

The copy model. A bulk copy is performed when its completion is observed, not when it is issued, which is
one legal timing of an asynchronous copy:
- global -> shared copies with `.mbarrier::complete_tx::bytes` are queued on their mbarrier and land (the
  global read, the shared write, then complete_tx of the box's bytes) when a thread of the CTA tests or
  waits on that mbarrier. Shared memory read before the wait still holds its old contents.
- shared -> global copies with `.bulk_group` are per thread: `cp.async.bulk.commit_group` closes the
  thread's pending copies into a group, `cp.async.bulk.wait_group(.read) N` performs all but the newest N
  groups (reading the shared source then), and whatever is left lands when the lane group finishes. A
  source buffer overwritten before its wait_group is stored with the new contents.
Global accesses of the copies go through the launch observer as ordinary ld/st data accesses (the issuing
instruction is the site), so races and per-peer byte counts see them.

`mbarrier.try_wait` blocks the thread until the phase completes (the PTX ISA lets it wait for a
system-dependent time; here the limit is "until it completes"); when every live thread of a CTA group is
blocked on mbarriers or barriers, the kernel hangs (simt.py). `mbarrier.test_wait` never blocks; a loop
around it is a polling loop for the scheduler.

Not simulated (NotSimulated, naming the instruction): clusters of more than one CTA (`.multicast::cluster`,
shared::cluster copies between CTAs, mapa), im2col and gather4/scatter4 modes, cp.reduce.async.bulk,
interleaved or packed-type tensor maps and the 128B_ATOM swizzles.
"""
from __future__ import annotations

import numpy as np

from . import tma
from .access import load, space_of, store
from .errors import MemoryFault, NotSimulated
from .memory import WINDOW_MASK, scatter, gather
from .ops_memory import _observed
from .registry import builds

TX_MASK = (1 << 21) - 1
COUNT_MASK = (1 << 20) - 1
VALID = 1 << 62
PHASE = 1 << 63


# --- mbarrier state ------------------------------------------------------------------------------
def unpack(word: int) -> tuple[int, int, int, int, bool]:
    """(phase, expected, pending, tx-count, initialised) of an mbarrier word."""
    tx = word & TX_MASK
    if tx & (1 << 20):
        tx -= 1 << 21
    return word >> 63, (word >> 41) & COUNT_MASK, (word >> 21) & COUNT_MASK, tx, bool(word & VALID)


def pack(phase: int, expected: int, pending: int, tx: int) -> int:
    return (phase << 63) | VALID | ((expected & COUNT_MASK) << 41) | ((pending & COUNT_MASK) << 21) | (tx & TX_MASK)


def _lanes(g, mask) -> np.ndarray:
    return np.flatnonzero(g.alive if mask is None else mask)


def _slot(g, lane: int, addr: int, generic: bool) -> int:
    """Byte offset in the group's shared array of the 8-byte mbarrier at `addr` for `lane`'s CTA."""
    a = int(addr)
    if a >> 60 == 1:      # a generic address in the shared window
        a &= WINDOW_MASK
    elif generic:
        raise MemoryFault(f"mbarrier operation on address 0x{a:x}, which is not in shared memory")
    if a % 8:
        raise MemoryFault(f"misaligned address: mbarrier at shared 0x{a:x} is not 8-byte aligned")
    if a + 8 > g.smem_size:
        raise MemoryFault(f"mbarrier at shared address 0x{a:x} beyond the {g.smem_size}-byte block allocation")
    return int(g.cta_of_lane[lane]) * g.smem_size + a


def _read(g, slot: int) -> int:
    return int.from_bytes(g.shared[slot:slot + 8].tobytes(), "little")


def _write(g, slot: int, word: int) -> None:
    g.shared[slot:slot + 8] = np.frombuffer(word.to_bytes(8, "little"), np.uint8)
    g.mbar_wait[:] = False                # threads blocked on an mbarrier look again
    g.launch.counters.stores += 1


def _state(g, slot: int, what: str) -> tuple[int, int, int, int]:
    phase, expected, pending, tx, valid = unpack(_read(g, slot))
    if not valid:
        raise MemoryFault(f"{what} on an mbarrier that mbarrier.init did not initialise "
                          f"(shared 0x{slot % g.smem_size:x})")
    return phase, expected, pending, tx


def _update(g, slot: int, phase: int, expected: int, pending: int, tx: int, what: str) -> None:
    if pending < 0:
        raise MemoryFault(f"{what}: more arrivals on an mbarrier than its expected count in one phase "
                          f"(shared 0x{slot % g.smem_size:x})")
    if abs(tx) > COUNT_MASK:
        raise MemoryFault(f"{what}: mbarrier transaction count out of range ({tx} bytes)")
    if pending == 0 and tx == 0:          # the phase completes
        phase, pending = phase ^ 1, expected
    _write(g, slot, pack(phase, expected, pending, tx))


def arrive(g, slot: int, count: int = 1, expect: int = 0, drop: bool = False, no_complete: bool = False) -> int:
    """expect-tx(expect), then arrive-on(count); the state before (pkb's encoding: the word itself)."""
    word = _read(g, slot)
    phase, expected, pending, tx = _state(g, slot, "mbarrier.arrive")
    tx += expect
    pending -= count
    if drop:
        expected -= count
    if no_complete and pending == 0 and tx == 0:
        raise MemoryFault("mbarrier.arrive.noComplete completed the phase (undefined behaviour in PTX)")
    _update(g, slot, phase, expected, pending, tx, "mbarrier.arrive")
    return word


def complete_tx(g, slot: int, nbytes: int) -> None:
    phase, expected, pending, tx = _state(g, slot, "complete_tx")
    _update(g, slot, phase, expected, pending, tx - nbytes, "complete_tx")


def land_loads(g, slot: int) -> None:
    """Perform the copies that signal the mbarrier at `slot`, oldest first."""
    queued = g.bulk_loads.pop(slot, None)
    for copy in queued or ():
        copy()


# --- mbarrier instructions -------------------------------------------------------------------------
@builds("mbarrier")
def mbarrier(ins, ctx):
    parts = ins.parts
    kind = parts[1]
    generic = space_of(parts) != "shared"
    ops = ins.operands
    if kind in ("init", "inval"):
        addr = ctx.address(ops[0])
        count = ctx.read(ops[1], "u32") if kind == "init" else None

        def init(g, m):
            a, c = np.broadcast_to(addr(g), (g.nlanes,)), (np.broadcast_to(count(g), (g.nlanes,)) if count else None)
            for lane in _lanes(g, m):
                slot = _slot(g, lane, a[lane], generic)
                if c is None:
                    _write(g, slot, 0)
                    continue
                n = int(c[lane])
                if not 1 <= n <= COUNT_MASK:
                    raise MemoryFault(f"mbarrier.init with count {n} (valid: 1 .. 2^20-1)")
                g.bulk_loads.pop(slot, None)
                _write(g, slot, pack(0, n, n, 0))
        return init
    if kind in ("expect_tx", "complete_tx"):
        addr, nbytes = ctx.address(ops[0]), ctx.read(ops[1], "u32")

        def tx(g, m):
            a, n = np.broadcast_to(addr(g), (g.nlanes,)), np.broadcast_to(nbytes(g), (g.nlanes,))
            for lane in _lanes(g, m):
                slot = _slot(g, lane, a[lane], generic)
                if kind == "complete_tx":
                    complete_tx(g, slot, int(n[lane]))
                else:
                    phase, expected, pending, t = _state(g, slot, "mbarrier.expect_tx")
                    _update(g, slot, phase, expected, pending, t + int(n[lane]), "mbarrier.expect_tx")
        return tx
    if kind in ("arrive", "arrive_drop"):
        if "shared::cluster" in parts and ops[0].strip() != "_":
            raise ctx.fail(f"{ins.opcode} (a remote arrive in a cluster)")
        expect = "expect_tx" in parts
        dest = None if ops[0].strip() == "_" else ctx.write(ops[0], "b64")
        addr = ctx.address(ops[1])
        extra = ctx.read(ops[2], "u32") if len(ops) > 2 else None

        def arr(g, m):
            a = np.broadcast_to(addr(g), (g.nlanes,))
            x = np.broadcast_to(extra(g), (g.nlanes,)) if extra else None
            out = np.zeros(g.nlanes, np.uint64)
            lanes = _lanes(g, m)
            for lane in lanes:
                slot = _slot(g, lane, a[lane], generic)
                n = int(x[lane]) if x is not None else 0
                out[lane] = arrive(g, slot, count=1 if expect or x is None else n, expect=n if expect else 0,
                                   drop=kind == "arrive_drop", no_complete="noComplete" in parts)
            if dest is not None:
                sel = np.zeros(g.nlanes, bool)
                sel[lanes] = True
                dest(g, out, sel)
        return arr
    if kind in ("test_wait", "try_wait"):
        return _wait(ins, ctx, kind == "try_wait", generic)
    if kind == "pending_count":
        dest, state = ctx.write(ops[0], "u32"), ctx.read(ops[1], "b64")
        return lambda g, m: dest(g, ((np.asarray(state(g)).astype(np.uint64) >> np.uint64(21))
                                     & np.uint64(COUNT_MASK)).astype(np.uint32), m)
    raise ctx.fail(ins.opcode)


def _wait(ins, ctx, blocking: bool, generic: bool):
    parity = "parity" in ins.parts
    ops = ins.operands
    dest = ctx.write(ops[0], "pred")
    addr = ctx.address(ops[1])
    which = ctx.read(ops[2], "u32" if parity else "b64")

    def wait(g, m):
        a, w = np.broadcast_to(addr(g), (g.nlanes,)), np.broadcast_to(which(g), (g.nlanes,))
        lanes = _lanes(g, m)
        done = np.zeros(g.nlanes, bool)
        for lane in lanes:
            slot = _slot(g, lane, a[lane], generic)
            land_loads(g, slot)
            phase = _state(g, slot, ins.opcode)[0]
            want = int(w[lane]) & 1 if parity else int(w[lane]) >> 63
            done[lane] = phase != want
        active = np.zeros(g.nlanes, bool)
        active[lanes] = True
        if not blocking:
            dest(g, done, active)
            return None
        dest(g, done, active & done)
        return active & ~done                 # these threads wait here (simt.MBAR_WAIT)
    wait.blocking = blocking
    return wait


# --- bulk copies ------------------------------------------------------------------------------------
_NOT_SIMULATED = ("multicast::cluster", "im2col", "im2col::w", "im2col::w::128", "tile::gather4",
                  "tile::scatter4", "cta_group::1", "cta_group::2")


@builds("cp.async.bulk")
def bulk(ins, ctx):
    """cp.async.bulk{.tensor}, .commit_group, .wait_group{.read}, .prefetch."""
    parts = ins.parts
    if parts[3] == "prefetch":
        return lambda g, m: None              # an L2 prefetch: nothing to do on the CPU
    if parts[3] == "commit_group":
        return _commit
    if parts[3] == "wait_group":
        return _wait_group(int(ins.operands[0]))
    bad = next((p for p in parts if p in _NOT_SIMULATED), None)
    if bad:
        raise ctx.fail(f"{ins.opcode} (.{bad}: pkb simulates clusters of one CTA and tile-mode copies)")
    tensor = parts[3] == "tensor"
    spaces = [p for p in parts[4 if tensor else 3:] if p.split("::")[0] in ("shared", "global")]
    if len(spaces) < 2:
        raise ctx.fail(ins.opcode)
    if spaces[0].startswith("shared") and spaces[1] == "global":
        if "mbarrier::complete_tx::bytes" not in parts:
            raise ctx.fail(ins.opcode)
        return _tensor_load(ins, ctx) if tensor else _bulk_load(ins, ctx)
    if spaces[0] == "global" and spaces[1].startswith("shared"):
        if "bulk_group" not in parts:
            raise ctx.fail(ins.opcode)
        return _tensor_store(ins, ctx) if tensor else _bulk_store(ins, ctx)
    raise ctx.fail(f"{ins.opcode} (shared-to-shared bulk copies between the CTAs of a cluster)")


def _shared_addr(g, a: int, what: str) -> int:
    a = int(a)
    if a >> 60 == 1:        # a generic address in the shared window (the operand is a shared address)
        a &= WINDOW_MASK
    if a % 16:
        raise MemoryFault(f"misaligned address: {what} shared address 0x{a:x} is not 16-byte aligned")
    return a


def _check_shared(g, offsets: np.ndarray, width: int, what: str) -> None:
    if len(offsets) and int(offsets.max()) + width > g.smem_size:
        raise MemoryFault(f"{what} reaches shared address 0x{int(offsets.max()):x}, beyond the {g.smem_size}-byte "
                          "block allocation")


def _tensor_operand(ctx, op: str):
    """`[tmap, {c0, c1, ...}]` -> (address reader of the map, coordinate readers)."""
    inner = op.strip()[1:-1]
    head, _, coords = inner.partition(",")
    coords = coords.strip()
    if not coords.startswith("{"):
        raise ctx.fail(f"tensor operand '{op}'")
    return ctx.address(head.strip()), [ctx.read(c, "s32") for c in ctx.vector(coords)]


def _tensor_map(g, lane: int, a: int, ins) -> tma.TensorMap:
    raw = load(g, "generic", np.array([a], np.uint64), np.array([lane]), np.uint8, tma.SIZE).reshape(-1)
    try:
        tm = tma.decode(raw.tobytes())
    except tma.NotATensorMap as e:
        raise NotSimulated(f"{ins.opcode}: the tensor map operand is {e} (pkb's driver stand-in encodes "
                           "the maps it can run)", ins.loc) from None
    why = tm.unsupported()
    if why:
        raise NotSimulated(f"{ins.opcode} with {why}", ins.loc)
    return tm


def _dims_of(ins) -> int:
    return int(next(p for p in ins.parts if p.endswith("d") and p[:-1].isdigit())[:-1])


def _issuing(g, m, readers):
    vals = [np.broadcast_to(r(g), (g.nlanes,)) for r in readers]
    return _lanes(g, m), vals


def _tensor_load(ins, ctx):
    dst = ctx.address(ins.operands[0])
    tmap, coords = _tensor_operand(ctx, ins.operands[1])
    mbar = ctx.address(ins.operands[2])
    generic_bar = False
    ndim = _dims_of(ins)

    def issue(g, m):
        lanes, vals = _issuing(g, m, [dst, tmap, mbar, *coords])
        d, t, b, cs = vals[0], vals[1], vals[2], vals[3:]
        for lane in lanes:
            tm = _tensor_map(g, lane, int(t[lane]), ins)
            if tm.rank != ndim:
                raise MemoryFault(f"{ins.opcode} with a tensor map of rank {tm.rank}")
            slot = _slot(g, lane, b[lane], generic_bar)
            base = _shared_addr(g, d[lane], "cp.async.bulk.tensor destination")
            at = [int(c[lane]) for c in cs]
            g.bulk_loads.setdefault(slot, []).append(_tensor_load_copy(g, ins, lane, tm, at, base, slot))
    return issue


def _box(g, lane, tm, at, base):
    """A box's global addresses, which of them lie inside the tensor, the carrier dtype, and where each element
    sits in the lane's block's shared memory (swizzled)."""
    addrs, inside, offs = tma.box_layout(tm, at)
    sh = tma.swizzle(np.uint64(base) + offs, tm.swizzle)
    _check_shared(g, sh, tm.esize, "cp.async.bulk.tensor")
    return addrs, inside, tma.carrier(tm), sh + np.uint64(int(g.cta_of_lane[lane]) * g.smem_size)


def _tensor_load_copy(g, ins, lane, tm, at, base, slot):
    def land():
        addrs, inside, dt, smem = _box(g, lane, tm, at, base)
        out = np.full(len(smem), tma.fill_value(tm), dt)
        a = addrs[inside]
        if len(a):
            out[inside] = _observed(g, "ld", ins, "global", a, tm.esize,
                                    lambda: load(g, "global", a, None, dt)).reshape(-1)
        scatter(g.shared_region, smem, dt, out)
        complete_tx(g, slot, tm.box_bytes)
    return land


def _tensor_store(ins, ctx):
    tmap, coords = _tensor_operand(ctx, ins.operands[0])
    src = ctx.address(ins.operands[1])
    ndim = _dims_of(ins)

    def issue(g, m):
        lanes, vals = _issuing(g, m, [src, tmap, *coords])
        s, t, cs = vals[0], vals[1], vals[2:]
        for lane in lanes:
            tm = _tensor_map(g, lane, int(t[lane]), ins)
            if tm.rank != ndim:
                raise MemoryFault(f"{ins.opcode} with a tensor map of rank {tm.rank}")
            base = _shared_addr(g, s[lane], "cp.async.bulk.tensor source")
            at = [int(c[lane]) for c in cs]
            _pending(g, lane).append(_tensor_store_copy(g, ins, lane, tm, at, base))
    return issue


def _tensor_store_copy(g, ins, lane, tm, at, base):
    def land():
        addrs, inside, dt, smem = _box(g, lane, tm, at, base)
        vals = gather(g.shared_region, smem, dt)[inside]
        a = addrs[inside]
        if len(a):
            _observed(g, "st", ins, "global", a, tm.esize,
                      lambda: store(g, "global", a, None, dt, vals.reshape(-1, 1)))
            g.launch.counters.stores += 1
    return land


def _bulk_load(ins, ctx):
    dst, src = ctx.address(ins.operands[0]), ctx.address(ins.operands[1])
    size, mbar = ctx.read(ins.operands[2], "u32"), ctx.address(ins.operands[3])

    def issue(g, m):
        lanes, (d, s, n, b) = _issuing(g, m, [dst, src, size, mbar])
        for lane in lanes:
            nbytes = int(n[lane])
            if nbytes % 16 or int(s[lane]) % 16:
                raise MemoryFault(f"{ins.opcode}: size {nbytes} and global address 0x{int(s[lane]):x} must be "
                                  "multiples of 16")
            slot = _slot(g, lane, b[lane], False)
            base = _shared_addr(g, d[lane], "cp.async.bulk destination")
            g.bulk_loads.setdefault(slot, []).append(
                _bulk_load_copy(g, ins, lane, base, int(s[lane]), nbytes, slot))
    return issue


def _bulk_load_copy(g, ins, lane, base, src, nbytes, slot):
    cta = int(g.cta_of_lane[lane])

    def land():
        offs = np.arange(nbytes, dtype=np.uint64)
        sh = np.uint64(base) + offs
        _check_shared(g, sh, 1, "cp.async.bulk")
        a = np.uint64(src) + offs
        data = _observed(g, "ld", ins, "global", a, 1, lambda: load(g, "global", a, None, np.uint8)).reshape(-1)
        scatter(g.shared_region, sh + np.uint64(cta * g.smem_size), np.uint8, data)
        complete_tx(g, slot, nbytes)
    return land


def _bulk_store(ins, ctx):
    dst, src, size = ctx.address(ins.operands[0]), ctx.address(ins.operands[1]), ctx.read(ins.operands[2], "u32")

    def issue(g, m):
        lanes, (d, s, n) = _issuing(g, m, [dst, src, size])
        for lane in lanes:
            nbytes = int(n[lane])
            if nbytes % 16 or int(d[lane]) % 16:
                raise MemoryFault(f"{ins.opcode}: size {nbytes} and global address 0x{int(d[lane]):x} must be "
                                  "multiples of 16")
            base = _shared_addr(g, s[lane], "cp.async.bulk source")
            _pending(g, lane).append(_bulk_store_copy(g, ins, lane, int(d[lane]), base, nbytes))
    return issue


def _bulk_store_copy(g, ins, lane, dst, base, nbytes):
    cta = int(g.cta_of_lane[lane])

    def land():
        offs = np.arange(nbytes, dtype=np.uint64)
        sh = np.uint64(base) + offs
        _check_shared(g, sh, 1, "cp.async.bulk")
        data = gather(g.shared_region, sh + np.uint64(cta * g.smem_size), np.uint8)
        a = np.uint64(dst) + offs
        _observed(g, "st", ins, "global", a, 1, lambda: store(g, "global", a, None, np.uint8, data.reshape(-1, 1)))
        g.launch.counters.stores += 1
    return land


def _groups(g, lane: int) -> list:
    """[pending copies, committed groups oldest first] of one thread's bulk async-groups."""
    return g.bulk_stores.setdefault(int(lane), [[], []])


def _pending(g, lane: int) -> list:
    return _groups(g, lane)[0]


def _commit(g, m):
    for lane in _lanes(g, m):
        state = _groups(g, lane)
        state[1].append(state[0])
        state[0] = []


def _wait_group(keep: int):
    def wait(g, m):
        for lane in _lanes(g, m):
            state = g.bulk_stores.get(int(lane))
            while state and len(state[1]) > keep:
                for copy in state[1].pop(0):
                    copy()
    return wait


def finish(g) -> None:
    """At the end of a lane group: bulk stores still in flight land (a kernel's end completes them)."""
    while g.bulk_stores:
        _, (pending, groups) = g.bulk_stores.popitem()
        for group in groups + [pending]:
            for copy in group:
                copy()
