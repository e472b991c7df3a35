"""The screen: static checks, then the functional run, then the cost prediction; the first stage that
rejects ends it. A candidate that runs into a limit of pkb (something it cannot simulate, a package or
header not installed here, the simulation's time, a reference that fails on the simulator) is
inconclusive, with the limit named, so it goes to hardware instead of being accepted or rejected."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from pkbsim.cuda.build_clock import BUILD_CLOCK
from pkbsim.screen.candidate import Session, extension_stand_in
from pkbsim.screen.cost import predict
from pkbsim.screen.functional import ReferenceFailed, functional
from pkbsim.screen.prebuild import prebuild
from pkbsim.screen.result import Reason, ScreenResult
from pkbsim.screen.static import static_reasons
from pkbsim.timing.topology import Topology
from tasks.registry import TaskSpec


@dataclass
class ScreenOptions:
    world_size: int
    topology: Topology
    seed: int = 0
    margin: float = 0.8          # reject when the predicted speed-up is below this (and the prediction is certain)
    timeout: float = 120.0       # per simulated run
    timeline: str | None = None  # where to write the candidate's simulated timeline (Chrome trace JSON)
    cost: bool = True
    build_timeout: float = 600.0  # for building the candidate's CUDA extensions, before the runs (off their clock)


def screen(task: TaskSpec, path: str, opts: ScreenOptions) -> ScreenResult:
    res = ScreenResult(task.slug, os.path.abspath(path), opts.world_size, opts.topology.name, opts.seed)
    t0 = time.perf_counter()
    problems = static_reasons(path)
    res.seconds["static"] = round(time.perf_counter() - t0, 3)
    if problems:
        return res.reject("static", problems)
    session = Session(os.path.abspath(path))
    with extension_stand_in(session):
        t0 = time.perf_counter()
        prebuild(session, task.reference, opts.build_timeout)
        res.seconds["build"] = round(time.perf_counter() - t0, 3)
        t0, built0 = time.perf_counter(), BUILD_CLOCK.total
        try:
            fn = functional(task, session, opts.world_size, opts.seed, opts.timeout,
                            record=opts.cost)
        except ReferenceFailed as e:
            return res.inconclusive("functional", Reason("reference", f"{e} (a bug of the task or of pkb)"))
        finally:
            # extensions built lazily (on the first call, not at import) are built inside the world, with
            # its watchdog paused: their time is build time, not the functional stage's
            built = BUILD_CLOCK.total - built0
            res.seconds["build"] = round(res.seconds["build"] + built, 3)
            res.seconds["functional"] = round(time.perf_counter() - t0 - built, 3)
        res.findings, res.correct = fn.findings, fn.correct
        res.compile = {name: r.to_json() for name, r in session.reports.items()} or None
        if session.problems:
            return res.reject("static", [Reason(p.kind, str(p), p.site) for p in session.problems])
        res.checked.append("static")
        if session.not_simulated:
            res.not_simulated = sorted(session.not_simulated)
            return res.inconclusive("functional", Reason("not_simulated", "; ".join(res.not_simulated)))
        if fn.limit:
            return res.inconclusive("functional", fn.limit)
        if fn.reasons:
            return res.reject("functional", fn.reasons)
        res.checked.append("functional")
        res.stage = "functional"
        if not opts.cost:
            return res
        t0 = time.perf_counter()
        res.predicted = predict(task, session, opts.world_size, opts.topology, opts.seed, opts.timeout, opts.timeline,
                                fn.traces)
        res.seconds["cost"] = round(time.perf_counter() - t0, 3)
    res.timeline, res.stage = opts.timeline, "cost"
    res.checked.append("cost")
    p = res.predicted
    if p.speedup < opts.margin and not p.uncertain:
        return res.reject("cost", [Reason("slower", f"predicted speed-up {p.speedup:.2f}x is below the margin "
                                                    f"{opts.margin:g}x ({p.bottleneck}: candidate "
                                                    f"{p.candidate_us:.1f} us vs reference {p.reference_us:.1f} us)")])
    return res
