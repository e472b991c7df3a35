"""Max-min fair rates by progressive filling, vectorised over all flows at once.

Each round gives every unfrozen flow the same rate increase until a resource saturates (or a flow reaches
its own cap); flows through the tightest resource freeze at that level. Rounds = distinct bottleneck levels,
usually one or two for a collective, so one solve is a few numpy passes over the (flows x hops) route array.
"""
from __future__ import annotations

import numpy as np

_TIE = 1e-9   # flows within this relative distance of the bottleneck freeze together


def max_min_rates(routes: np.ndarray, caps: np.ndarray, flow_caps: np.ndarray) -> np.ndarray:
    """routes: (F, L) resource indices (padded with an index whose capacity is inf); caps: (R,) per resource;
    flow_caps: (F,) per-flow limits (inf for none). Returns the (F,) max-min fair rates."""
    nres = len(caps)
    rate = np.empty(len(routes))
    left = caps.astype(float).copy()
    idx = np.arange(len(routes))
    r, fc = routes, flow_caps
    while idx.size:
        counts = np.bincount(r.ravel(), minlength=nres)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = left / counts
        level = np.minimum(share[r].min(axis=1), fc)
        m = level.min()
        if not np.isfinite(m):   # nothing limits the rest: they move instantly
            rate[idx] = np.inf
            break
        freeze = level <= m * (1 + _TIE)
        rate[idx[freeze]] = m
        left -= np.bincount(r[freeze].ravel(), minlength=nres) * m
        np.maximum(left, 0.0, out=left)
        keep = ~freeze
        idx, r, fc = idx[keep], r[keep], fc[keep]
    return rate
