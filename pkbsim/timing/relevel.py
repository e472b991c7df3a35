"""Max-min rates re-solved from the bottleneck levels of the previous solve.

In a max-min fair allocation every flow runs at the level of its bottleneck: the lowest-level resource it
crosses among those that saturate. Knowing which resources are bottlenecks and the order of their levels, the
levels solve a lower-triangular system (a bottleneck's capacity is shared by its own flows and by flows of
lower-level bottlenecks that cross it). The answer is the max-min allocation exactly when it passes the
optimality test: no resource over capacity and no flow faster than a bottleneck it crosses or its own cap.

A flow finishing (or a few starting) changes that structure a little, so the previous levels are a good
guess: solve, and if the test fails, re-order the bottlenecks by the levels just solved, let an overloaded
resource join them at its water level, and solve again. An all-to-all settles in about two tries of a few
vector steps each, where progressive filling (maxmin.py) takes one step per saturating resource (~60). After
a few tries, or with too many bottlenecks for a dense system, filling answers instead.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dtrtrs

from pkbsim.timing.maxmin import fill

_TRIES = 4
_MAX_NECKS = 512   # the system is dense (bottlenecks x bottlenecks): beyond this, warm-started filling wins
_TOL = 1e-12       # relative slack of the optimality test (float rounding of the solve)


def solve(routes: np.ndarray, caps: np.ndarray, flow_caps: np.ndarray, guess: np.ndarray | None,
          kept: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """As maxmin.fill (rates, (R,) levels), starting from `guess`: the levels a previous solve returned
    (`kept`: those of them that still stand, for filling's warm start)."""
    out = None if guess is None else relevel(routes, caps, flow_caps, guess)
    return fill(routes, caps, flow_caps, kept) if out is None else out


def relevel(routes: np.ndarray, caps: np.ndarray, flow_caps: np.ndarray,
            guess: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(rates, levels) repaired from `guess` (inf: not a bottleneck), or None if that does not settle."""
    nres = len(caps)
    routes = np.ascontiguousarray(routes.T)         # (L, F): per-flow reductions run along rows
    width = len(routes)
    level = guess.copy()
    capped = np.flatnonzero(np.isfinite(flow_caps))
    for _ in range(_TRIES):
        necks = np.flatnonzero(level < np.inf)
        necks = necks[np.argsort(level[necks], kind="stable")]
        m = len(necks)
        if m > _MAX_NECKS:
            return None
        rank = np.full(nres, m)                     # m: not a bottleneck
        rank[necks] = np.arange(m)
        crossed = rank[routes]
        neck = crossed.min(axis=0)                  # each flow's lowest bottleneck
        own = capped[flow_caps[capped] < np.append(level[necks], np.inf)[neck[capped]]]   # held by its own cap
        neck[own] = m
        # column-major counts: system[i, j] = flows of bottleneck j crossing bottleneck i
        system = np.bincount((neck * (m + 1) + crossed).ravel(), minlength=(m + 1) ** 2)
        system = system.reshape(m + 1, m + 1)[:m, :m].astype(float).T
        rhs = caps[necks]
        if own.size:
            rhs = rhs - np.bincount(crossed[:, own].ravel(), weights=np.tile(flow_caps[own], width),
                                    minlength=m + 1)[:m]
        used = np.diagonal(system) > 0
        if not used.any():
            return None
        if not used.all():                          # bottlenecks nobody sits on any more are dropped
            system, rhs = system[np.ix_(used, used)], rhs[used]
            crossed = np.where(np.append(used, True)[crossed], crossed, m)
        solved = np.full(m + 1, np.inf)
        solved[:m][used] = dtrtrs(system, rhs, lower=1)[0]
        if not np.all(solved[:m][used] > 0):
            return None
        level[necks] = solved[:m]
        rate = solved[neck]
        rate[own] = flow_caps[own]
        over = _overloaded(rate, crossed == m, routes, caps)
        if not over.size and _within_levels(rate, solved, crossed, flow_caps, capped):
            return rate, level
        for r in over:
            level[r] = _water_level(caps[r], rate[(routes == r).any(axis=0)])
    return None


def _overloaded(rate: np.ndarray, loose: np.ndarray, routes: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Resources over capacity; bottlenecks carry exactly theirs, so only the `loose` route entries count."""
    at = np.flatnonzero(loose.ravel())
    load = np.bincount(routes.ravel()[at], weights=rate[at % len(rate)], minlength=len(caps))
    return np.flatnonzero(load > caps * (1 + _TOL))


def _within_levels(rate: np.ndarray, solved: np.ndarray, crossed: np.ndarray, flow_caps: np.ndarray,
                   capped: np.ndarray) -> bool:
    """No flow faster than its cap or than a bottleneck it crosses (`solved`: levels by rank). A flow sits on
    its lowest-ranked bottleneck, so only capped flows need a look unless the solve put levels out of rank
    order."""
    if capped.size:
        lowest = np.minimum(solved[crossed[:, capped]].min(axis=0), flow_caps[capped])
        if np.any(rate[capped] > lowest * (1 + _TOL)):
            return False
    ranked = solved[:-1][solved[:-1] < np.inf]
    return bool(np.all(ranked[1:] >= ranked[:-1]) or np.all(rate <= solved[crossed].min(axis=0) * (1 + _TOL)))


def _water_level(cap: float, rates: np.ndarray) -> float:
    """The level at which a resource saturates when the flows crossing it keep `rates` below it."""
    rates = np.sort(rates)
    below = np.concatenate([[0.0], np.cumsum(rates[:-1])])
    share = (cap - below) / np.arange(len(rates), 0, -1)
    return float(share[np.argmax(share <= rates)])
