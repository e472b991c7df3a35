"""Operand access compiled once per instruction: readers, writers and address computations.

Registers hold raw bits (unsigned of their width); a reader views them as the instruction's type, so
`mov.b32 %f1, %r1` and friends are free. Immediates become numpy scalars of the instruction's type.
"""
from __future__ import annotations

import re

import numpy as np

from .dtypes import SIGNED_OF_SIZE, UNSIGNED_OF_SIZE, carrier, storage
from .errors import NotSimulated
from .memory import PARAM_WINDOW
from .parser import parse_number

SPECIAL = re.compile(r"^%(tid|ntid|ctaid|nctaid)\.[xyz]$|^%(laneid|warpid|nwarpid|smid|nsmid|clock|clock64|"
                     r"globaltimer|globaltimer_lo|lanemask_(lt|le|eq|ge|gt)|dynamic_smem_size|"
                     r"total_smem_size|gridid)$")


class Ctx:
    """What a builder needs to know about the function: register types, symbols, labels, location."""

    def __init__(self, regs: dict[str, str], symbols: dict[str, int], loc: str = "?",
                 params: dict[str, int] | None = None, frame_params: frozenset = frozenset()):
        self.regs, self.symbols, self.loc = regs, symbols, loc
        self.params = params or {}              # kernel parameter -> offset in the param buffer
        self.frame_params = frame_params        # call-site/function parameters, kept in local memory

    def fail(self, what: str):
        return NotSimulated(what, self.loc)

    def symbol(self, name: str) -> int | None:
        """The address a symbol names: a variable's, or a kernel parameter's in the parameter window."""
        if name in self.symbols:
            return self.symbols[name]
        if name in self.params:
            return PARAM_WINDOW + self.params[name]
        return None

    # --- reads -------------------------------------------------------------------------------
    def read(self, op: str, typ: str):
        c = carrier(typ)
        op = op.strip()
        if op.startswith("!"):
            inner = self.read(op[1:], "pred")
            return lambda g: ~inner(g)
        if op in self.regs:
            s = storage(self.regs[op])
            if s == np.bool_ or c == np.bool_:
                if s != c:
                    raise self.fail(f"predicate/integer mix on {op}")
                return lambda g: g.regs[op]
            if s.itemsize == c.itemsize:
                return lambda g: g.regs[op].view(c)
            if c.kind == "f":
                raise self.fail(f"{typ} read of {op} (declared {self.regs[op]})")
            src = (SIGNED_OF_SIZE if c.kind == "i" else UNSIGNED_OF_SIZE)[s.itemsize]
            return lambda g: g.regs[op].view(src).astype(c)
        if SPECIAL.match(op):
            return lambda g: g.special(op).astype(c, copy=False) if c != np.uint32 else g.special(op)
        base, plus, off = op.partition("+")
        where = self.symbol(base.strip())
        if where is not None:
            value = self.const(where + (int(parse_number(off)) if plus else 0), typ)
            return lambda g: value
        if op == "WARP_SZ":  # PTX's built-in constant (nvcc emits it for warpSize)
            value = self.const(32, typ)
            return lambda g: value
        try:
            value = self.const(parse_number(op, typ), typ)
        except ValueError:
            raise self.fail(f"operand '{op}'") from None
        return lambda g: value

    @staticmethod
    def const(v, typ: str):
        c = carrier(typ)
        if typ == "pred":
            return np.bool_(v)
        if c.kind == "f":
            return c.type(v)
        if isinstance(v, float):
            if typ in ("f16", "bf16") or v != int(v):
                raise ValueError(v)
            v = int(v)
        return np.array(v & ((1 << (8 * c.itemsize)) - 1), dtype=UNSIGNED_OF_SIZE[c.itemsize]).view(c)[()]

    # --- writes ------------------------------------------------------------------------------
    def write(self, op: str, typ: str):
        """fn(group, value, mask): store `value` (carried as `typ`) into a register, under `mask`."""
        op = op.strip()
        if op == "_":
            return lambda g, v, m: None
        if op not in self.regs:
            raise self.fail(f"destination '{op}'")
        c = carrier(typ)
        s = storage(self.regs[op])
        if s == np.bool_ or c == np.bool_:
            same = True
        else:
            same = s.itemsize == c.itemsize
        ext = None
        if not same:
            # a narrow load into a wide register extends; a wide value into a narrow one truncates
            ext = (SIGNED_OF_SIZE if c.kind == "i" else UNSIGNED_OF_SIZE)[s.itemsize]

        def write(g, v, m):
            arr = g.regs[op]
            if same:
                tgt = arr if s == c else arr.view(c)
                if m is None:
                    tgt[...] = v
                else:
                    np.copyto(tgt, v, where=m, casting="unsafe")
            else:
                v = np.asarray(v).astype(c, copy=False).astype(ext).view(s)
                if m is None:
                    arr[...] = v
                else:
                    np.copyto(arr, v, where=m)
        return write

    # --- vectors and addresses -------------------------------------------------------------------
    @staticmethod
    def vector(op: str) -> list[str]:
        op = op.strip()
        if op.startswith("{"):
            return [x.strip() for x in op.strip("{}").split(",")]
        return [op]

    def address(self, op: str):
        """`[reg+imm]`, `[symbol+imm]`, `[imm]` -> fn(group) giving uint64 addresses."""
        inner = op.strip().strip("[]").replace(" ", "")
        m = re.match(r"^([^+\-]+)(?:([+\-])(.+))?$", inner)
        if not m:
            raise self.fail(f"address '{op}'")
        base, sign, off = m.groups()
        offset = int(parse_number(off)) * (-1 if sign == "-" else 1) if sign else 0
        if base in self.regs:
            rd = self.read(base, "u64" if storage(self.regs[base]).itemsize == 8 else "u32")
            o = np.uint64(offset & (2 ** 64 - 1))
            if offset == 0:
                return lambda g: rd(g).astype(np.uint64, copy=False)
            return lambda g: rd(g).astype(np.uint64) + o
        if self.symbol(base) is not None:
            value = np.uint64(self.symbol(base) + offset)
            return lambda g: value
        try:
            value = np.uint64(int(parse_number(base)) + offset)
        except ValueError:
            raise self.fail(f"address '{op}'") from None
        return lambda g: value
