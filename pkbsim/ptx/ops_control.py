"""Control helpers the decoder uses: CTA barriers are scheduled by the executor, traps raise."""
from __future__ import annotations

from .errors import KernelHang


class BarrierSpec:
    """A CTA barrier: `bar.sync`/`barrier.sync` wait, `bar.arrive` only counts; an optional thread
    count makes it a named (partial) barrier, as warp-specialised kernels use."""

    def __init__(self, ins, ctx):
        self.waits, self.loc = "arrive" not in ins.parts, ctx.loc
        ops = ins.operands
        self.plain = self.waits and len(ops) <= 1 and (not ops or ops[0].strip() == "0")
        self.bid = ctx.read(ops[0], "u32") if ops else (lambda g: 0)
        self.count = ctx.read(ops[1], "u32") if len(ops) > 1 else None


def cta_barrier(ins, ctx):
    """A BarrierSpec for bar.sync / bar.arrive / barrier.sync (not bar.warp.sync, not bar.red)."""
    p = ins.parts
    if p[0] not in ("bar", "barrier") or len(p) < 2:
        return None
    rest = [x for x in p[1:] if x not in ("cta", "aligned")]
    if rest[:1] in (["sync"], ["arrive"]):
        return BarrierSpec(ins, ctx)
    return None


def trap(ctx):
    where = ctx.loc

    def run(g, m):
        raise KernelHang(f"kernel executed trap (assert or __trap) at {where}")
    return run
