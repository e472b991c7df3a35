"""Max-min fair rates by progressive filling, resource by resource.

The water level rises for every unfrozen flow; the resource with the lowest fair share (capacity left / its
unfrozen flows) saturates first and freezes its flows at that share. Shares never decrease while filling
(flows freeze at or below the share of every resource they cross), so taking resources one at a time in
order of share is exact, ties included. Each step touches only the flows of the saturating resource (a CSR
index by resource), so a solve costs one pass over the routes plus a few small numpy steps per resource that
saturates. Per-flow caps are private resources with one flow each.

The level at which each resource saturated is returned too: relevel.py starts the next solve from it.

Warm start: when flows were only removed since the last solve, filling is unchanged below the lowest rate a
removed flow had (the removed flows' resources saturated no earlier than that), so the resources that
saturated below it keep their levels (`kept`), the flows crossing them keep the lowest of those, and filling
resumes from there.
"""
from __future__ import annotations

import numpy as np


def max_min_rates(routes: np.ndarray, caps: np.ndarray, flow_caps: np.ndarray) -> np.ndarray:
    """routes: (F, L) resource indices (padded with an index whose capacity is inf); caps: (R,) per resource;
    flow_caps: (F,) per-flow limits (inf for none). Returns the (F,) max-min fair rates (inf: unconstrained)."""
    return fill(routes, caps, flow_caps)[0]


def fill(routes: np.ndarray, caps: np.ndarray, flow_caps: np.ndarray,
         kept: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """max_min_rates, and the (R,) level at which each resource saturated (inf: it froze no flow);
    kept: (R,) levels that still stand (inf elsewhere), see the warm start above."""
    nflows, nres = len(routes), len(caps)
    capped = np.flatnonzero(np.isfinite(flow_caps))
    caps = np.concatenate([caps, flow_caps[capped], [np.inf]]).astype(float)
    pad = len(caps) - 1
    if capped.size:
        own = np.full(nflows, pad)
        own[capped] = pad - capped.size + np.arange(capped.size)
        routes = np.hstack([routes, own[:, None]])
    width = routes.shape[1]
    level = np.full(len(caps), np.inf)
    rate = np.full(nflows, np.inf)
    if kept is not None:
        level[:nres] = kept
        rate = level[routes].min(axis=1)
    frozen = rate < np.inf
    state = np.zeros((len(caps), 2))       # per resource: capacity left, flows still rising
    state[:, 0] = caps - np.bincount(routes[frozen].ravel(), weights=np.repeat(rate[frozen], width),
                                     minlength=len(caps))
    todo = np.flatnonzero(~frozen)         # filling runs over these flows only (a CSR index by resource)
    flat = routes[todo].ravel()
    order = np.argsort(flat, kind="stable")
    entry_flow = todo[order // width]
    bounds = np.searchsorted(flat[order], np.arange(len(caps) + 1)).tolist()
    state[:, 1] = np.bincount(flat, minlength=len(caps))
    left, count = state[:, 0], state[:, 1]
    live = count > 0.5
    share = np.full(len(caps), np.inf)     # stays inf for resources no rising flow crosses
    step = np.array([0.0, 1.0])            # (level, one flow) taken off each resource a frozen flow crosses
    while True:
        np.divide(left, count, out=share, where=live)
        r = int(share.argmin())
        if share[r] == np.inf:
            return rate, level[:nres]
        level[r] = share[r]
        flows = entry_flow[bounds[r]:bounds[r + 1]]
        flows = flows[~frozen[flows]]
        rate[flows] = level[r]
        frozen[flows] = True
        hit = np.take(routes, flows, axis=0).ravel()
        step[0] = level[r]
        np.subtract.at(state, hit, step)
        live[hit] = count[hit] > 0.5
        share[hit] = np.inf
