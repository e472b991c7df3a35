"""Device-side printf: `call vprintf, (format, args)` formatted per active lane, in lane order.

The argument buffer follows the CUDA ABI: each argument aligned to its size, integers 4 bytes unless
`l`/`ll`, floating point promoted to double, strings and pointers 8 bytes.
"""
from __future__ import annotations

import re
import sys

import numpy as np

from .access import load
from .memory import WINDOW_MASK

_SPEC = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|z|j|t|L)?([diouxXeEfFgGcsp%])")


def _c_string(g, lane: int, addr: int, limit: int = 4096) -> str:
    if addr == 0:
        return "(null)"
    out = bytearray()
    while len(out) < limit:
        byte = int(_read(g, lane, addr + len(out), np.uint8))
        if byte == 0:
            break
        out.append(byte)
    return out.decode(errors="replace")


def _read(g, lane: int, addr: int, dtype):
    window = addr >> 60
    space = "global" if window == 0 else "shared" if window == 1 else "local"
    a = addr & WINDOW_MASK if window else addr
    return load(g, space, np.array([a], np.uint64), np.array([lane]), dtype)[0, 0]


def format_c(g, lane: int, fmt: str, args_addr: int) -> str:
    """C printf formatting of one lane's arguments."""
    offset = 0
    pieces, pos = [], 0
    for m in _SPEC.finditer(fmt):
        pieces.append(fmt[pos:m.start()])
        pos = m.end()
        flags, length, conv = m.groups()
        if conv == "%":
            pieces.append("%")
            continue
        if conv in "eEfFgG":
            size, dtype = 8, np.float64
        elif conv in "sp" or length in ("l", "ll", "z", "j", "t"):
            size, dtype = 8, np.int64 if conv in "di" else np.uint64
        else:
            size, dtype = 4, np.int32 if conv in "dic" else np.uint32
        offset = -(-offset // size) * size
        value = _read(g, lane, args_addr + offset, dtype)
        offset += size
        if conv == "s":
            pieces.append(("%" + flags + "s") % _c_string(g, lane, int(value)))
        elif conv == "p":
            pieces.append(f"0x{int(value):x}")
        elif conv == "c":
            pieces.append(chr(int(value) & 0xFF))
        else:
            pieces.append(("%" + flags + ("d" if conv in "iu" else conv)) % value.item())
    pieces.append(fmt[pos:])
    return "".join(pieces)


def build_vprintf(ctx, fmt_slot: str, args_slot: str, ret_slot: str | None):
    """A plain instruction standing for `call vprintf`: its slots are per-lane local memory."""
    fmt_off, args_off = ctx.symbols[fmt_slot], ctx.symbols[args_slot]
    ret_off = ctx.symbols[ret_slot] if ret_slot else None

    def run(g, m):
        lanes = np.flatnonzero(g.alive if m is None else m)
        frames = g.local.reshape(g.nlanes, g.local_size)
        for lane in lanes:
            fmt_addr = int(frames[lane, fmt_off:fmt_off + 8].view(np.uint64)[0])
            args_addr = int(frames[lane, args_off:args_off + 8].view(np.uint64)[0])
            text = format_c(g, int(lane), _c_string(g, int(lane), fmt_addr), args_addr)
            sys.stdout.write(text)
            if ret_off is not None:
                frames[lane, ret_off:ret_off + 4] = np.frombuffer(np.int32(len(text)).tobytes(), np.uint8)
        sys.stdout.flush()
    return run


