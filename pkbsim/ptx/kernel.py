"""A parsed PTX function decoded into executable form: memory layout, symbols and compiled instructions.

Decoding is lazy per instruction family but eager per kernel: an unsupported instruction is found when
the kernel is first launched, before any thread runs, and reported with its source line.
"""
from __future__ import annotations

from . import ops_control, ops_convert, ops_float, ops_int, ops_memory, ops_mma, ops_warp  # noqa: F401
from .errors import NotSimulated
from .operands import Ctx
from .parser import Function
from .registry import BUILDERS
from .simt import BARRIER, BRANCH, EXIT, PLAIN, Decoded


def _align(x: int, a: int) -> int:
    return -(-x // max(a, 1)) * max(a, 1)


class Kernel:
    """One `.entry`: its code, shared/local layout and parameter layout."""

    def __init__(self, fn: Function, global_symbols: dict[str, int], module_shared: list):
        if not fn.is_entry:
            raise NotSimulated(f"launch of .func {fn.name} (only .entry kernels launch)", fn.name)
        self.name, self.fn, self.regs = fn.name, fn, fn.regs
        symbols = dict(global_symbols)
        offset = 0
        extern = []
        for var in list(module_shared) + [v for v in fn.vars if v.space == "shared"]:
            if var.size == 0:
                extern.append(var)
                continue
            offset = _align(offset, var.align)
            symbols[var.name] = offset
            offset += var.size
        for var in extern:  # dynamic shared memory starts after the static part
            offset = _align(offset, max(var.align, 16))
            symbols[var.name] = offset
        self.static_shared = offset
        local = 0
        for var in fn.vars:
            if var.space == "local":
                local = _align(local, var.align)
                symbols[var.name] = local
                local += var.size
        self.local_size = local
        self.params, poff = {}, 0
        self.param_layout = []
        for p in fn.params:
            poff = _align(poff, p.align)
            self.params[p.name] = poff
            self.param_layout.append((p, poff))
            poff += p.size
        self.param_size = poff
        self.symbols = symbols
        self.code = [self._decode(ins, symbols) for ins in fn.code]
        self.code.append(Decoded(None, EXIT, None, None, False, f"{fn.name}:end", "ret"))

    def _decode(self, ins, symbols) -> Decoded:
        ctx = Ctx(self.fn, symbols, ins.loc)
        ctx.params = self.params
        text = f"{ins.opcode} {', '.join(ins.operands)}".strip()
        guard, neg = (ins.guard[0], ins.guard[1]) if ins.guard else (None, False)
        head = ins.parts[0]
        if head == "bra":
            target = self.fn.labels.get(ins.operands[0].strip())
            if target is None:
                raise NotSimulated(f"branch to unknown label {ins.operands[0]}", ins.loc)
            return Decoded(None, BRANCH, target, guard, neg, ins.loc, text)
        if head in ("ret", "exit", "trap"):
            if head == "trap":
                return Decoded(ops_control.trap(ctx), PLAIN, None, guard, neg, ins.loc, text)
            return Decoded(None, EXIT, None, guard, neg, ins.loc, text)
        if ops_control.is_cta_barrier(ins):
            return Decoded(None, BARRIER, None, guard, neg, ins.loc, text)
        builder = BUILDERS.get(head) or BUILDERS.get(".".join(ins.parts[:2]))
        if builder is None:
            raise NotSimulated(ins.opcode, ins.loc)
        try:
            fn = builder(ins, ctx)
        except NotSimulated:
            raise
        except (KeyError, ValueError, IndexError) as e:
            raise NotSimulated(f"{text} ({e})", ins.loc) from None
        return Decoded(fn, PLAIN, None, guard, neg, ins.loc, text)
