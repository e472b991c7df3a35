"""The flow network inside a SimPy environment: flows start, share resources max-min fairly, and finish.

Time is in µs and sizes in bytes. Rates are recomputed once per simulated timestamp (all starts and finishes
at one instant are batched into one solve) and stay fixed until the next flow finishes, so the cost is one
solve per distinct finishing time (each solve starts from the bottleneck levels of the last one; see
relevel.py). With `resolution_us` > 0, finishes are batched onto a grid of that step:
a flow that is done stops moving bytes at once, but the bandwidth it frees is handed out at the next grid
point, so each finish is seen at most one step late (bytes stay exact). Flow state lives in preallocated
numpy arrays; a stale wake-up timer is ignored through a version counter. A message sent as back-to-back chunks on one route is one flow: under a
fluid model the rates depend only on which flows are active, so chunk boundaries change nothing.
"""
from __future__ import annotations

import numpy as np
import simpy

from pkbsim.timing.relevel import solve

_DONE = 1e-9   # a flow is finished when what is left is below this fraction of its size (float drift)


class FlowNetwork:
    def __init__(self, env: simpy.Environment, caps: np.ndarray, pad: int, record: bool = False,
                 resolution_us: float = 0.0):
        self.env, self.caps, self.pad, self.record = env, caps, pad, record
        self.resolution_us = resolution_us
        self.carried = np.zeros(len(caps))        # bytes each resource moved (kept when record=True)
        self.timeline: list[tuple[float, np.ndarray, np.ndarray]] = []   # (t, resources, load) when record
        self.solves = 0
        self.flows_started = 0
        self._grow(1024, 2)
        self._free = list(range(1023, -1, -1))
        self._groups: dict[int, list] = {}        # group id -> [flows not finished, event]
        self._next_group = 0
        self._t = 0.0
        self._version = 0
        self._pending = False
        self._levels = None                       # per resource, from the last solve: the next one starts there
        self._added = False                       # a flow started since the last solve
        self._removed_below = np.inf              # lowest rate a flow finished with since the last solve

    def _grow(self, rows: int, width: int) -> None:
        old = getattr(self, "_routes", None)
        n0 = 0 if old is None else len(old)
        routes = np.full((rows, width), self.pad, dtype=np.int64)
        arrays = {"_left": 0.0, "_size": 1.0, "_rate": 0.0, "_fcap": np.inf}
        if old is not None:
            routes[:n0, :old.shape[1]] = old
        self._routes = routes
        for name, fill in arrays.items():
            a = np.full(rows, fill)
            if old is not None:
                a[:n0] = getattr(self, name)
            setattr(self, name, a)
        alive, group = np.zeros(rows, bool), np.full(rows, -1, dtype=np.int64)
        if old is not None:
            alive[:n0], group[:n0] = self._alive, self._group
            self._free.extend(range(rows - 1, n0 - 1, -1))
        self._alive, self._group = alive, group

    def start(self, routes: np.ndarray, sizes, caps=None) -> simpy.Event:
        """Start one flow per row of `routes` (from Router.pack); the event fires when all of them finish."""
        sizes = np.broadcast_to(np.asarray(sizes, dtype=float), (len(routes),))
        caps = np.full(len(routes), np.inf) if caps is None else np.broadcast_to(np.asarray(caps, float), sizes.shape)
        done = self.env.event()
        bounded = (routes != self.pad).any(axis=1) | np.isfinite(caps)
        live = (sizes > 0) & bounded
        k = int(live.sum())
        if k == 0:
            return done.succeed()
        if len(self._free) < k or routes.shape[1] > self._routes.shape[1]:
            self._grow(max(len(self._routes), 2 * (len(self._routes) - len(self._free) + k)),
                       max(self._routes.shape[1], routes.shape[1]))
        self._advance()
        slots = np.array([self._free.pop() for _ in range(k)])
        gid = self._next_group
        self._next_group += 1
        self._groups[gid] = [k, done]
        self._routes[slots] = self.pad
        self._routes[slots, :routes.shape[1]] = routes[live]
        self._left[slots] = self._size[slots] = sizes[live]
        self._fcap[slots] = caps[live]
        self._alive[slots] = True
        self._group[slots] = gid
        self.flows_started += k
        self._added = True
        self._request_settle()
        return done

    def _request_settle(self) -> None:
        if not self._pending:
            self._pending = True
            self.env.timeout(0).callbacks.append(self._settle)

    def _advance(self) -> None:
        dt = self.env.now - self._t
        if dt > 0:
            alive = np.flatnonzero(self._alive)
            moved = np.minimum(self._rate[alive] * dt, self._left[alive])
            self._left[alive] -= moved
            if self.record and alive.size:
                r = np.take(self._routes, alive, axis=0)
                self.carried += np.bincount(r.ravel(), weights=np.repeat(moved, r.shape[1]), minlength=len(self.caps))
        self._t = self.env.now

    def _settle(self, _event=None) -> None:
        self._pending = False
        self._advance()
        alive = np.flatnonzero(self._alive)
        self._version += 1
        if not alive.size:
            return
        routes = np.take(self._routes, alive, axis=0)
        kept = None
        if not self._added and self._levels is not None:   # only removals: lower levels stand (maxmin.py)
            kept = np.where(self._levels < self._removed_below * (1 - 1e-9), self._levels, np.inf)
        rates, self._levels = solve(routes, self.caps, self._fcap[alive], self._levels, kept)
        self._added, self._removed_below = False, np.inf
        self.solves += 1
        self._rate[alive] = rates
        if self.record:
            load = np.bincount(routes.ravel(), weights=np.repeat(rates, routes.shape[1]), minlength=len(self.caps))
            used = np.flatnonzero(load[:self.pad])
            self.timeline.append((self.env.now, used, load[used]))
        with np.errstate(divide="ignore"):
            dt = max(float(np.min(self._left[alive] / rates)), 0.0)
        if self.resolution_us > 0:
            step = self.resolution_us
            dt = max(np.ceil((self.env.now + dt) / step - 1e-9) * step - self.env.now, 0.0)
        version = self._version
        self.env.timeout(dt).callbacks.append(lambda _e: self._wake(version))

    def _wake(self, version: int) -> None:
        if version != self._version:
            return
        self._advance()
        alive = np.flatnonzero(self._alive)
        rate = self._rate[alive]
        # finished: nothing left, or less than the float drift of one more picosecond at the current rate
        over = alive[(self._left[alive] <= _DONE * self._size[alive]) | (self._left[alive] <= rate * 1e-6)]
        if self.record and over.size:   # credit the crumbs the finish test forgave
            r = np.take(self._routes, over, axis=0)
            crumbs = np.maximum(self._left[over], 0.0)
            self.carried += np.bincount(r.ravel(), weights=np.repeat(crumbs, r.shape[1]), minlength=len(self.caps))
        if over.size:
            self._removed_below = min(self._removed_below, float(self._rate[over].min()))
        self._left[over] = 0.0
        self._alive[over] = False
        self._rate[over] = 0.0
        self._free.extend(over.tolist())
        done = []
        for gid in self._group[over].tolist():   # mostly one flow: a loop beats np.unique
            g = self._groups[gid]
            g[0] -= 1
            if g[0] == 0:
                done.append(gid)
        for gid in sorted(done):
            self._groups.pop(gid)[1].succeed()
        self._request_settle()

    @property
    def active(self) -> int:
        return int(self._alive.sum())
