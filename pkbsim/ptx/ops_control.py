"""Control helpers the decoder uses: CTA barriers are scheduled by the executor, traps raise."""
from __future__ import annotations

from .errors import KernelHang


class BarrierSpec:
    """A CTA barrier: `bar.sync`/`barrier.sync` wait, `bar.arrive` only counts; an optional thread
    count makes it a named (partial) barrier, as warp-specialised kernels use. `bar.red.{popc,and,or}`
    (`__syncthreads_count/and/or`, cub's block-wide votes) also reduce a predicate over the threads that
    waited and give every one of them the result (`red`: the operation, `pred`: the predicate's reader,
    `dest`: the result's writer)."""

    def __init__(self, ins, ctx, red: str | None = None):
        self.waits, self.loc, self.red = "arrive" not in ins.parts, ctx.loc, red
        ops = ins.operands
        if red:
            self.dest = ctx.write(ops[0], "u32" if red == "popc" else "pred")
            self.pred, ops = ctx.read(ops[-1], "pred"), ops[1:-1]
        self.plain = self.waits and not red and len(ops) <= 1 and (not ops or ops[0].strip() == "0")
        self.bid = ctx.read(ops[0], "u32") if ops else (lambda g: 0)
        self.count = ctx.read(ops[1], "u32") if len(ops) > 1 else None


def cta_barrier(ins, ctx):
    """A BarrierSpec for bar.sync / bar.arrive / barrier.sync / bar.red (not bar.warp.sync)."""
    p = ins.parts
    if p[0] not in ("bar", "barrier") or len(p) < 2:
        return None
    rest = [x for x in p[1:] if x not in ("cta", "aligned")]
    if rest[:1] in (["sync"], ["arrive"]):
        return BarrierSpec(ins, ctx)
    if rest[:1] == ["red"] and rest[1:2] in (["popc"], ["and"], ["or"]):
        return BarrierSpec(ins, ctx, red=rest[1])
    return None


def trap(ctx):
    where = ctx.loc

    def run(g, m):
        raise KernelHang(f"kernel executed trap (assert or __trap) at {where}")
    return run
