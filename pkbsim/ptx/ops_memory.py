"""ld/st, atomics and reductions, cp.async groups, multimem, fences and cache hints.

The interpreter is sequentially consistent, so memory-order qualifiers (relaxed/acquire/release,
scopes, volatile) need no extra work here; they are kept on the instruction for the multi-rank
protocol checks. Atomics apply lane by lane in lane order (a legal GPU serialisation).

A launch may carry an `observer` (the multi-rank world's, pkbsim.device.ptx_memory): global and generic
accesses and fences then go through `observer.access(g, op, ins, addrs, width, run)` and
`observer.fence(g, ins)`, which see the addresses and qualifiers and perform the access by calling `run`.
"""
from __future__ import annotations

import numpy as np

from .access import check_aligned, global_parts, load, locate, space_of, store
from .dtypes import carrier
from .errors import MemoryFault, NotSimulated
from .memory import SHARED_WINDOW, MulticastRegion, gather, scatter
from .ops_float import pack, unpack
from .registry import builds


def _vec(parts) -> int:
    for p in parts:
        if p in ("v2", "v4", "v8"):
            return int(p[1:])
    return 1


_OBSERVED = ("global", "generic")


def _observed(g, op, ins, space, a, width, run):
    obs = g.launch.observer
    if obs is None or space not in _OBSERVED:
        return run()
    return obs.access(g, op, ins, a, width, run)


def _lanes(mask):
    return None if mask is None else np.flatnonzero(mask)


def _io(typ: str) -> str:
    return {"f16": "b16", "bf16": "b16", "f16x2": "b32", "bf16x2": "b32", "b128": "b64"}.get(typ, typ)


@builds("ld", "ldu")
def ld(ins, ctx):
    typ, space, nvec = ins.parts[-1], space_of(ins.parts), _vec(ins.parts)
    if typ == "b128":
        raise ctx.fail(ins.opcode)
    io = _io(typ)
    c = carrier(io)
    dests = ctx.vector(ins.operands[0])
    writers = [ctx.write(d, io) for d in dests]
    if space == "param":
        name = _param_name(ins.operands[1])
        if name in ctx.frame_params:
            space = "local"      # a call's argument or return slot
        elif name in ctx.params:
            return _ld_param(ins, ctx, c, writers, nvec)
        # else a computed address in the parameter window (a struct parameter indexed at run time)
    addr = ctx.address(ins.operands[1])

    def run(g, m):
        idx = _lanes(m)
        a = addr(g)
        if np.ndim(a) == 0:
            a = np.full(g.nlanes, a, np.uint64)
        if idx is not None:
            a = a[idx]
            if not len(a):
                return
        if space in _SHARED_BY_LANES and _uniform(a):
            return _ld_uniform(g, m, a, space, c, nvec, writers, ins)
        check_aligned(a, c.itemsize * nvec)
        vals = _observed(g, "ld", ins, space, a, c.itemsize * nvec, lambda: load(g, space, a, idx, c, nvec))
        for i, w in enumerate(writers):
            if idx is None:
                w(g, vals[:, i], None)
            else:
                full = np.zeros(g.nlanes, c)
                full[idx] = vals[:, i]
                w(g, full, m)
    return run


_SHARED_BY_LANES = ("global", "const", "generic")   # spaces where one address is one word for every lane (generic: if global)


def _uniform(a: np.ndarray) -> bool:
    """Every active lane's address is the same (a table entry or an argument every thread reads), in global memory."""
    a0 = a[0]
    return a.size > 1 and a[-1] == a0 and int(a0) < SHARED_WINDOW and not (a != a0).any()


def _ld_uniform(g, m, a, space, c, nvec, writers, ins) -> None:
    """A load whose active lanes all read one address: the word is read once and written to every active lane, as the
    lane-by-lane load would. The observer sees the lanes' addresses as one zero-stride vector of the same length (and
    counts every lane's bytes, as before); alignment, faults and their messages are those of the lanes' address."""
    one = a[:1].copy()
    check_aligned(one, c.itemsize * nvec)
    lanes = np.ndarray(a.shape, one.dtype, one, 0, (0,))   # np.broadcast_to's view, at a tenth of its cost
    vals = _observed(g, "ld", ins, space, lanes, c.itemsize * nvec, lambda: load(g, space, one, None, c, nvec))
    for i, w in enumerate(writers):
        w(g, vals[0, i], m)


def _param_name(op: str) -> str:
    return op.strip().strip("[]").replace(" ", "").partition("+")[0]


def _ld_param(ins, ctx, c, writers, nvec):
    inner = ins.operands[1].strip().strip("[]").replace(" ", "")
    name, _, off = inner.partition("+")
    offset = ctx.params[name] + (int(off) if off else 0)

    def run(g, m):
        raw = g.launch.param_bytes
        vals = np.frombuffer(raw, dtype=c, count=nvec, offset=offset)
        for i, w in enumerate(writers):
            w(g, vals[i], m)
    return run


@builds("st")
def st(ins, ctx):
    typ, space, nvec = ins.parts[-1], space_of(ins.parts), _vec(ins.parts)
    if typ == "b128":
        raise ctx.fail(ins.opcode)
    if space == "param":
        if _param_name(ins.operands[0]) not in ctx.frame_params:
            raise ctx.fail(f"{ins.opcode} to a kernel parameter")
        space = "local"
    io = _io(typ)
    c = carrier(io)
    addr = ctx.address(ins.operands[0])
    readers = [ctx.read(v, io) for v in ctx.vector(ins.operands[1])]

    def run(g, m):
        idx = _lanes(m)
        a = addr(g)
        if np.ndim(a) == 0:
            a = np.full(g.nlanes, a, np.uint64)
        vals = np.stack([np.broadcast_to(r(g), (g.nlanes,)) for r in readers], axis=1)
        if idx is not None:
            a, vals = a[idx], vals[idx]
            if not len(a):
                return
        check_aligned(a, c.itemsize * nvec)
        _observed(g, "st", ins, space, a, c.itemsize * nvec, lambda: store(g, space, a, idx, c, vals, nvec))
        g.launch.counters.stores += 1
    return run


# --- atomics -------------------------------------------------------------------------------------
def _atomic_op(op: str, typ: str):
    """(old, operand) -> new value, elementwise, in the carrier of `typ`."""
    c = carrier(_io(typ))
    if typ in ("f16", "bf16", "f16x2", "bf16x2"):
        f = {"add": np.add, "min": np.fmin, "max": np.fmax}[op]
        return lambda o, b: np.asarray(pack(typ, [f(x, y) for x, y in zip(unpack(typ, o), unpack(typ, b))]))
    if typ in ("f32", "f64") and op in ("add", "min", "max"):
        f = {"add": np.add, "min": np.fmin, "max": np.fmax}[op]
        return lambda o, b: f(o, b).astype(c)
    ops = {
        "add": lambda o, b: o + b, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
        "min": np.minimum, "max": np.maximum, "exch": lambda o, b: b,
        "inc": lambda o, b: np.where(o >= b, c.type(0), o + c.type(1)),
        "dec": lambda o, b: np.where((o == 0) | (o > b), b, o - c.type(1)),
    }
    return ops[op]


def _occurrence_rank(addr: np.ndarray):
    """For each lane, how many earlier lanes hit the same address (the serialisation round)."""
    order = np.argsort(addr, kind="stable")
    sorted_a = addr[order]
    start = np.r_[True, sorted_a[1:] != sorted_a[:-1]]
    group_start = np.maximum.accumulate(np.where(start, np.arange(len(addr)), 0))
    rank = np.empty(len(addr), np.int64)
    rank[order] = np.arange(len(addr)) - group_start
    return rank


def _atomic(ins, ctx, returns: bool):
    parts = ins.parts
    typ = parts[-1]
    op = next(p for p in parts[1:] if p in ("add", "min", "max", "inc", "dec", "and", "or", "xor",
                                              "exch", "cas"))
    space = space_of(parts)
    io = _io(typ)
    c = cdt = carrier(io)
    ops = ins.operands
    d = ctx.write(ops[0], io) if returns else None
    rest = ops[1:] if returns else ops
    addr = ctx.address(rest[0])
    b = ctx.read(rest[1], io)
    swap = ctx.read(rest[2], io) if op == "cas" else None
    f = None if op == "cas" else _atomic_op(op, typ)

    def run(g, m):
        idx = _lanes(m)
        a = addr(g)
        if np.ndim(a) == 0:
            a = np.full(g.nlanes, a, np.uint64)
        bv = np.broadcast_to(b(g), (g.nlanes,))
        cv = np.broadcast_to(swap(g), (g.nlanes,)) if swap else None
        if idx is not None:
            a, bv = a[idx], bv[idx]
            cv = cv[idx] if cv is not None else None
            if not len(a):
                return
        check_aligned(a, cdt.itemsize)
        old = _observed(g, op, ins, space, a, cdt.itemsize, lambda: _apply_atomic(g, space, a, idx, bv, cv, cdt, op, f))
        if d is not None:
            if idx is None:
                d(g, old.view(c) if old.dtype != c else old, None)
            else:
                full = np.zeros(g.nlanes, c)
                full[idx] = old.view(c) if old.dtype.itemsize == c.itemsize else old
                d(g, full, m)
    return run


def _apply_atomic(g, space, a, idx, bv, cv, cdt, op, f) -> np.ndarray:
    """Apply an atomic lane by lane (lanes hitting one address serialise in lane order); old values."""
    old = np.empty(len(a), cdt)
    changed = False
    for sel, region, off in _atomic_targets(g, space, a, idx, cdt.itemsize):
        sel = slice(None) if sel is None else sel
        view = region.view(cdt)
        slot = off // np.uint64(cdt.itemsize)
        b, c = bv[sel], (cv[sel] if cv is not None else None)
        rank = _occurrence_rank(a[sel])
        part_old = np.empty(len(slot), cdt)
        for r in range(int(rank.max()) + 1):
            hit = rank == r
            s = slot[hit]
            o = view[s]
            part_old[hit] = o
            new = np.where(o == b[hit], c[hit], o) if op == "cas" else f(o, b[hit])
            changed = changed or bool((new.view(np.uint8) != o.view(np.uint8)).any())
            view[s] = new
        old[sel] = part_old
    if changed:
        g.launch.counters.stores += 1
    return old


def _atomic_targets(g, space, a, idx, width) -> list:
    if space == "generic":
        window = a >> np.uint64(60)
        if (window != window[0]).any():
            raise NotSimulated("atomic over addresses in several state spaces", "?")
        space = {0: "global", 1: "shared", 2: "local"}.get(int(window[0]), "global")
        if space != "global":
            a = a & np.uint64((1 << 60) - 1)
    parts = global_parts(g, a, width) if space == "global" else [(None, *locate(g, space, a, idx, width))]
    if any(isinstance(region, MulticastRegion) for _, region, _ in parts):
        raise NotSimulated("atomic on a multicast address", "?")
    return parts


@builds("atom")
def atom(ins, ctx):
    return _atomic(ins, ctx, returns=True)


@builds("red")
def red(ins, ctx):
    return _atomic(ins, ctx, returns=False)


# --- cp.async ----------------------------------------------------------------------------------------
@builds("cp.async")
def cp_async(ins, ctx):
    kind = ins.parts[2] if len(ins.parts) > 2 else ""
    if kind == "commit_group":
        def commit(g, m):
            g.async_groups.append(g.async_pending)
            g.async_pending = []
        return commit
    if kind in ("wait_group", "wait_all"):
        keep = 0 if kind == "wait_all" else int(ins.operands[0])

        def wait(g, m):
            if kind == "wait_all" and g.async_pending:
                g.async_groups.append(g.async_pending)
                g.async_pending = []
            while len(g.async_groups) > keep:
                for region, off, data in g.async_groups.pop(0):
                    scatter(region, off, np.uint8, data)
        return wait
    if kind not in ("ca", "cg"):   # cp.async.bulk has its own builder (ops_async)
        raise ctx.fail(ins.opcode)
    dst, src = ctx.address(ins.operands[0]), ctx.address(ins.operands[1])
    size = int(ins.operands[2])
    src_size = ctx.read(ins.operands[3], "u32") if len(ins.operands) > 3 and not ins.operands[3].startswith("%p") else None

    def copy(g, m):
        idx = _lanes(m)
        d, s = np.broadcast_to(dst(g), (g.nlanes,)), np.broadcast_to(src(g), (g.nlanes,))
        n = np.broadcast_to(src_size(g), (g.nlanes,)) if src_size else None
        if idx is not None:
            d, s = d[idx], s[idx]
            n = n[idx] if n is not None else None
            if not len(d):
                return
        check_aligned(s, size)
        check_aligned(d, size)
        data = load(g, "global", s, idx, np.uint8, size)
        if n is not None:  # bytes beyond src-size are zero-filled
            data = np.where(np.arange(size)[None, :] < n[:, None].astype(np.int64), data, 0).astype(np.uint8)
        flat = (d[:, None] + np.arange(size, dtype=np.uint64)).reshape(-1)
        lanes = np.repeat(np.arange(g.nlanes) if idx is None else idx, size)
        region, off = locate(g, "shared", flat, lanes, 1)
        g.async_pending.append((region, off, data.reshape(-1)))
    return copy


# --- multimem ----------------------------------------------------------------------------------------
def _multicast(g, addr):
    region = g.launch.memory.find(int(addr.min()))
    if not isinstance(region, MulticastRegion):
        if region is None:  # e.g. multicast_ptr 0 (no multicast object) used as a base: a fault on a GPU
            raise MemoryFault(f"multimem access to address 0x{int(addr.min()):x}, which is no multicast buffer "
                              f"(multicast_ptr is 0 where the machine has no multicast: check it before use)")
        raise NotSimulated("multimem access to an address that is not a multicast buffer "
                           "(multimem needs the multi-rank world's multicast mapping)", "?")
    return region, addr - np.uint64(region.base)


@builds("multimem.ld_reduce", "multimem.st", "multimem.red")
def multimem(ins, ctx):
    kind = ins.parts[1]
    typ, nvec = ins.parts[-1], _vec(ins.parts)
    op = next((p for p in ins.parts if p in ("add", "min", "max", "and", "or", "xor")), None)
    io = _io(typ)
    c = carrier(io)
    if kind == "ld_reduce":
        dests = [ctx.write(x, io) for x in ctx.vector(ins.operands[0])]
        addr = ctx.address(ins.operands[1])
    else:
        addr = ctx.address(ins.operands[0])
        srcs = [ctx.read(x, io) for x in ctx.vector(ins.operands[1])]

    def run(g, m):
        idx = _lanes(m)
        a = np.broadcast_to(addr(g), (g.nlanes,))
        if idx is not None:
            a = a[idx]
        if not len(a):
            return
        check_aligned(a, c.itemsize * nvec)
        flat = (a[:, None] + np.arange(nvec, dtype=np.uint64) * np.uint64(c.itemsize)).reshape(-1)
        _observed(g, "multimem", ins, "global", a, c.itemsize * nvec, lambda: apply(g, m, idx, flat))

    def apply(g, m, idx, flat):
        region, off = _multicast(g, flat)
        if kind == "ld_reduce":
            values = [gather(mem, off, c) for mem in region.members]
            out = _reduce(values, typ, op).reshape(-1, nvec)
            for i, w in enumerate(dests):
                full = np.zeros(g.nlanes, c)
                full[slice(None) if idx is None else idx] = out[:, i]
                w(g, full, m)
            return
        vals = np.stack([np.broadcast_to(r(g), (g.nlanes,)) for r in srcs], axis=1)
        vals = (vals if idx is None else vals[idx]).reshape(-1).astype(c)
        for mem in region.members:
            if kind == "st":
                scatter(mem, off, c, vals)
            else:
                scatter(mem, off, c, _reduce([gather(mem, off, c), vals], typ, op))
        g.launch.counters.stores += 1
    return run


def _reduce(values, typ, op):
    if typ in ("f16", "bf16", "f16x2", "bf16x2", "f32", "f64"):
        ft = carrier(typ) if typ in ("f32", "f64") else None
        parts = [unpack(typ, v.view(ft) if ft else v) for v in values]
        f = {"add": np.add, "min": np.fmin, "max": np.fmax}[op]
        acc = [p.astype(np.float32) for p in parts[0]]
        for p in parts[1:]:
            acc = [f(x, y.astype(np.float32)) for x, y in zip(acc, p)]
        out = pack(typ, acc)
        return np.asarray(out).view(values[0].dtype) if ft else out
    f = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
         "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    acc = values[0]
    for v in values[1:]:
        acc = f(acc, v)
    return acc


# --- ordering, hints and no-ops ----------------------------------------------------------------
def _nothing(g, m):
    return None


@builds("membar", "fence")
def fence(ins, ctx):
    """Sequentially consistent memory: a fence orders nothing more here, but the multi-rank observer
    learns from it which flag accesses it turns into release/acquire."""
    if ins.parts[0] == "fence" and any(p.startswith(("proxy", "mbarrier_init")) for p in ins.parts[1:]):
        # fence.proxy.async / .tensormap and fence.mbarrier_init: the interpreter's proxies share one coherent
        # memory (a missing proxy fence is not detected), and they order nothing for peer GPUs
        return _nothing

    def run(g, m):
        if g.launch.observer is not None:
            g.launch.observer.fence(g, ins)
    return run


@builds("prefetch", "prefetchu", "griddepcontrol", "discard", "applypriority",
        "griddepcontrol.wait", "griddepcontrol.launch_dependents", "pmevent")
def no_effect(ins, ctx):
    """Cache hints and dependent-launch controls: nothing to do on the CPU."""
    return _nothing


@builds("createpolicy")
def createpolicy(ins, ctx):
    w = ctx.write(ins.operands[0], "b64")
    return lambda g, m: w(g, np.uint64(0), m)


@builds("nanosleep")
def nanosleep(ins, ctx):
    """A sleeping thread is waiting on something: let the scheduler run other work."""
    def sleep(g, m):
        g.yield_requested = True
    return sleep
