"""Control helpers the decoder uses: CTA barriers are scheduled by the executor, traps raise."""
from __future__ import annotations

from .errors import KernelHang


def is_cta_barrier(ins) -> bool:
    """bar.sync / barrier.sync / bar.cta.sync (not bar.warp.sync; bar.arrive does not wait)."""
    p = ins.parts
    if p[0] not in ("bar", "barrier") or len(p) < 2:
        return False
    rest = [x for x in p[1:] if x not in ("cta", "aligned")]
    if rest and rest[0] in ("sync", "red") and p[1] != "warp":
        if rest[0] == "red" or len(ins.operands) > 1:
            return False  # with a thread count or a reduction: not the plain barrier
        return True
    return False


def trap(ctx):
    where = ctx.loc

    def run(g, m):
        raise KernelHang(f"kernel executed trap (assert or __trap) at {where}")
    return run
