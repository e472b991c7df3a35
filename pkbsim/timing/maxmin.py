"""Max-min fair rates by progressive filling, resource by resource.

The water level rises for every unfrozen flow; the resource with the lowest fair share (capacity left / its
unfrozen flows) saturates first and freezes its flows at that share. Shares never decrease while filling
(flows freeze at or below the share of every resource they cross), so taking resources one at a time in
order of share is exact, ties included. Each step touches only the flows of the saturating resource (a CSR
index by resource), so a solve costs one pass over the routes plus a few small numpy steps per resource that
saturates. Per-flow caps are private resources with one flow each.

Warm start: when flows were only removed since the last solve, filling is unchanged below the lowest rate a
removed flow had (the removed flows' resources saturated no earlier than that), so flows known to be below it
keep their rates (`known`) and filling resumes from there.
"""
from __future__ import annotations

import numpy as np


def max_min_rates(routes: np.ndarray, caps: np.ndarray, flow_caps: np.ndarray,
                  known: np.ndarray | None = None) -> np.ndarray:
    """routes: (F, L) resource indices (padded with an index whose capacity is inf); caps: (R,) per resource;
    flow_caps: (F,) per-flow limits (inf for none); known: (F,) rates already final (nan where not).
    Returns the (F,) max-min fair rates (inf: unconstrained)."""
    nflows = len(routes)
    capped = np.flatnonzero(np.isfinite(flow_caps))
    caps = np.concatenate([caps, flow_caps[capped], [np.inf]]).astype(float)
    pad = len(caps) - 1
    if capped.size:
        own = np.full(nflows, pad)
        own[capped] = pad - capped.size + np.arange(capped.size)
        routes = np.hstack([routes, own[:, None]])
    width = routes.shape[1]
    rate = np.full(nflows, np.inf)
    done = np.zeros(nflows, bool) if known is None else ~np.isnan(known)
    state = np.zeros((len(caps), 2))       # per resource: capacity left, flows still rising
    state[:, 0] = caps
    if done.any():
        rate[done] = known[done]
        state[:, 0] -= np.bincount(routes[done].ravel(), weights=np.repeat(known[done], width), minlength=len(caps))
    todo = np.flatnonzero(~done)           # filling runs over these flows only (a CSR index by resource)
    routes = routes[todo]
    flat = routes.ravel()
    order = np.argsort(flat, kind="stable")
    entry_flow = order // width
    bounds = np.searchsorted(flat[order], np.arange(len(caps) + 1)).tolist()
    state[:, 1] = np.bincount(flat, minlength=len(caps))
    left, count = state[:, 0], state[:, 1]
    frozen = np.zeros(len(todo), bool)
    live = count > 0.5
    share = np.full(len(caps), np.inf)     # stays inf for resources no rising flow crosses
    step = np.array([0.0, 1.0])            # (level, one flow) taken off each resource a frozen flow crosses
    while True:
        np.divide(left, count, out=share, where=live)
        r = int(share.argmin())
        level = float(share[r])
        if level == np.inf:
            return rate
        flows = entry_flow[bounds[r]:bounds[r + 1]]
        flows = flows[~frozen[flows]]
        rate[todo[flows]] = level
        frozen[flows] = True
        hit = routes[flows].ravel()
        step[0] = level
        np.subtract.at(state, hit, step)
        live[hit] = count[hit] > 0.5
        share[hit] = np.inf
