"""A `.entry` decoded into executable form: flattened code, memory layout, symbols.

Device functions it calls (transitively) are appended to its code with their registers and parameter
names prefixed, so one program counter per lane covers calls; a call pushes a per-lane return address.
Parameters of calls live in local memory; a call site's argument and return slots alias the callee's
parameter slots, so no copying is needed (recursion is reported, not simulated).

Decoding is eager: an unsupported instruction is found at the first launch, before any thread runs,
and reported with its source line.
"""
from __future__ import annotations

import re

from . import ops_async, ops_control, ops_convert, ops_float, ops_int, ops_memory, ops_mma, ops_warp  # noqa: F401
from .errors import NotSimulated
from .operands import Ctx
from .ops_printf import build_vprintf
from .parser import Function, Instr, Var
from .registry import BUILDERS
from .simt import BARRIER, BRANCH, CALL, EXIT, MBAR_WAIT, PLAIN, RETURN, Decoded

_POLL_HINTS = ("volatile", "acquire", "relaxed", "sys", "gpu")
_TOKEN = re.compile(r"%?[A-Za-z_$][\w$@]*")


def _polls(ins) -> bool:
    """Could this instruction observe another thread's write in a spin loop?"""
    head = ins.parts[0]
    return (head in ("atom", "nanosleep") or (head == "ld" and any(p in _POLL_HINTS for p in ins.parts))
            or ins.parts[:2] == ["mbarrier", "test_wait"])   # try_wait blocks (ops_async): no spinning


def _align(x: int, a: int) -> int:
    return -(-x // max(a, 1)) * max(a, 1)


def _call_parts(ins: Instr):
    """(return slot names, callee, argument slot names) of a `call` instruction."""
    ops = [o.strip() for o in ins.operands]
    rets = []
    if ops and ops[0].startswith("("):
        rets = [x.strip() for x in ops.pop(0).strip("()").split(",") if x.strip()]
    callee = ops.pop(0) if ops else "?"
    args = [x.strip() for x in ops[0].strip("()").split(",") if x.strip()] if ops else []
    return rets, callee, args


def _prefixed(fn: Function) -> Function:
    """A copy of a device function whose registers and parameter names cannot clash with its caller's."""
    pre = fn.name + "$"
    local_names = set(fn.regs) | {v.name for v in fn.params + fn.returns + fn.vars}

    def sub(text):
        return _TOKEN.sub(lambda m: pre + m.group(0) if m.group(0) in local_names else m.group(0), text)

    def var(v):
        return Var(pre + v.name, v.space, v.type, v.size, v.align, v.init)

    out = Function(fn.name, False, [var(v) for v in fn.params], [var(v) for v in fn.returns],
                   {pre + r: t for r, t in fn.regs.items()}, [var(v) for v in fn.vars], [], dict(fn.labels))
    for ins in fn.code:
        guard = (pre + ins.guard[0], ins.guard[1]) if ins.guard and ins.guard[0] in local_names else ins.guard
        ops = [sub(o) for o in ins.operands]
        out.code.append(Instr(ins.opcode, ops, guard, ins.loc))
    return out


class Kernel:
    """One `.entry` plus the device functions it calls: code, shared/local layout, parameter layout."""

    def __init__(self, fn: Function, global_symbols: dict[str, int], module_shared: list,
                 functions: dict[str, Function] | None = None):
        if not fn.is_entry:
            raise NotSimulated(f"launch of .func {fn.name} (only .entry kernels launch)", fn.name)
        self.name, self.fn = fn.name, fn
        parts = self._closure(fn, functions or {})
        self.regs = {r: t for f in parts for r, t in f.regs.items()}
        symbols = dict(global_symbols)
        self.static_shared = self._layout_shared(symbols, list(module_shared) + [v for v in fn.vars if v.space == "shared"])
        frame_params = self._layout_local(symbols, parts)
        self.params, self.param_layout, poff = {}, [], 0
        for p in fn.params:
            poff = _align(poff, p.align)
            self.params[p.name] = poff
            self.param_layout.append((p, poff))
            poff += p.size
        self.param_size = poff
        self.symbols = symbols
        # a grid-stride loop reads the grid's size: its host picks the grid, not the data (pkbsim.timing.trace_scale)
        self.reads_grid_size = any(op.startswith("%nctaid") for f in parts for ins in f.code for op in ins.operands)
        starts, total = {}, 0
        for f in parts:
            starts[f.name] = total
            total += len(f.code) + 1
        self.code = []
        for f in parts:
            base = starts[f.name]
            ctx_args = (self.regs, symbols)
            for ins in f.code:
                self.code.append(self._decode(ins, f, base, starts, ctx_args, frame_params))
            self.code.append(Decoded(None, EXIT if f.is_entry else RETURN, None, None, False, f"{f.name}:end", "ret"))
        for i, d in enumerate(self.code):
            if d.kind == BRANCH and d.target <= i:
                f = next(p for p in reversed(parts) if starts[p.name] <= i)
                lo = d.target - starts[f.name]
                d.poll_loop = any(_polls(ins) for ins in f.code[lo:i - starts[f.name] + 1])

    @staticmethod
    def _closure(entry: Function, functions: dict[str, Function]) -> list[Function]:
        """The entry and every device function reachable from it, callees prefixed."""
        order, seen, todo = [entry], {entry.name}, [entry]
        while todo:
            f = todo.pop()
            for ins in f.code:
                if ins.parts[0] != "call":
                    continue
                callee = _call_parts(ins)[1]
                if callee == "vprintf":
                    continue
                if callee not in functions:
                    raise NotSimulated(f"call to {callee} (external functions such as printf/vprintf and "
                                       "__assertfail are not simulated)", ins.loc)
                if callee not in seen:
                    seen.add(callee)
                    order.append(_prefixed(functions[callee]))
                    todo.append(order[-1])
        return order

    @staticmethod
    def _layout_shared(symbols, shared_vars) -> int:
        offset, extern = 0, []
        for var in shared_vars:
            if var.size == 0:
                extern.append(var)
                continue
            offset = _align(offset, var.align)
            symbols[var.name] = offset
            offset += var.size
        for var in extern:  # dynamic shared memory starts after the static part
            offset = _align(offset, max(var.align, 16))
            symbols[var.name] = offset
        return offset

    def _layout_local(self, symbols, parts) -> frozenset:
        """Local frames of every function, then parameter slots; call sites alias the callee's slots."""
        local, frame_params = 0, set()
        callees = {f.name: f for f in parts if not f.is_entry}
        for f in parts:
            slots = [v for v in f.vars if v.space in ("local", "param")]   # frames, then call-site slots
            frame_params.update(v.name for v in f.vars if v.space == "param")
            if not f.is_entry:
                slots += f.params + f.returns
            for var in slots:
                local = _align(local, var.align)
                symbols[var.name] = local
                local += var.size
            if not f.is_entry:
                frame_params.update(v.name for v in f.params + f.returns)
        for f in parts:
            for ins in f.code:
                if ins.parts[0] != "call":
                    continue
                rets, callee, args = _call_parts(ins)
                if callee == "vprintf":
                    continue
                target = callees[callee]
                if len(args) != len(target.params) or len(rets) != len(target.returns):
                    raise NotSimulated(f"call to {callee} with a mismatched parameter list", ins.loc)
                for site, slot in zip(rets + args, target.returns + target.params):
                    symbols[site] = symbols[slot.name]   # the call site writes the callee's slot
        self.local_size = _align(local, 16)   # per-lane frames stay 16-byte aligned
        return frozenset(frame_params)

    def _decode(self, ins, f: Function, base: int, starts, ctx_args, frame_params) -> Decoded:
        ctx = Ctx(*ctx_args, ins.loc, params=self.params if f.is_entry else None, frame_params=frame_params)
        text = f"{ins.opcode} {', '.join(ins.operands)}".strip()
        guard, neg = (ins.guard[0], ins.guard[1]) if ins.guard else (None, False)
        head = ins.parts[0]
        if head == "bra":
            target = f.labels.get(ins.operands[0].strip())
            if target is None:
                raise NotSimulated(f"branch to unknown label {ins.operands[0]}", ins.loc)
            return Decoded(None, BRANCH, base + target, guard, neg, ins.loc, text)
        if head == "call":
            rets, callee, args = _call_parts(ins)
            if callee == "vprintf":
                return Decoded(build_vprintf(ctx, args[0], args[1], rets[0] if rets else None), PLAIN, None,
                               guard, neg, ins.loc, text)
            if callee == f.name or callee == self.name:
                raise NotSimulated(f"recursive call to {callee}", ins.loc)
            return Decoded(None, CALL, starts[callee], guard, neg, ins.loc, text)
        if head in ("ret", "exit"):
            kind = RETURN if head == "ret" and not f.is_entry else EXIT
            return Decoded(None, kind, None, guard, neg, ins.loc, text)
        if head == "trap":
            return Decoded(ops_control.trap(ctx), PLAIN, None, guard, neg, ins.loc, text)
        barrier = ops_control.cta_barrier(ins, ctx)
        if barrier is not None:
            return Decoded(barrier, BARRIER, None, guard, neg, ins.loc, text)
        builder = (BUILDERS.get(head) or BUILDERS.get(".".join(ins.parts[:3]))     # cp.async.bulk before cp.async
                   or BUILDERS.get(".".join(ins.parts[:2])))
        if builder is None:
            raise NotSimulated(ins.opcode, ins.loc)
        try:
            fn = builder(ins, ctx)
        except NotSimulated:
            raise
        except (KeyError, ValueError, IndexError) as e:
            raise NotSimulated(f"{text} ({e})", ins.loc) from None
        kind = MBAR_WAIT if getattr(fn, "blocking", False) else PLAIN
        return Decoded(fn, kind, None, guard, neg, ins.loc, text)
