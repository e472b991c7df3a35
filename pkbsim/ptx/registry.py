"""Opcode -> builder table. Each instruction family module registers its builders here.

A builder takes (instr, ctx) and returns a callable `fn(group, mask)` that applies the instruction to
the lanes selected by `mask` (None: every live lane). Control flow is handled by the executor.
"""
from __future__ import annotations

BUILDERS: dict[str, callable] = {}


def builds(*opcodes: str):
    def deco(fn):
        for name in opcodes:
            BUILDERS[name] = fn
        return fn
    return deco
