"""Plans run in the SimPy flow network: latency first, then the phase's flows, phase after phase."""
from __future__ import annotations

import simpy

from pkbsim.timing.closed_form import phase_arrays
from pkbsim.timing.network import FlowNetwork
from pkbsim.timing.plans import Plan
from pkbsim.timing.routes import Router


def run_plan(env: simpy.Environment, net: FlowNetwork, plan: Plan, router: Router):
    """A SimPy process body: yields until every phase of `plan` has finished."""
    for lat, routes, wire, cap in phase_arrays(plan, router):
        if lat > 0:
            yield env.timeout(lat)
        if len(wire):
            yield net.start(routes, wire, cap)


def simulate_plan(plan: Plan, router: Router, record: bool = False) -> tuple[float, FlowNetwork]:
    """Time of one collective alone on the machine (µs), and the network it ran on."""
    env = simpy.Environment()
    net = FlowNetwork(env, router.caps, router.pad, record=record)
    env.process(run_plan(env, net, plan, router))
    env.run()
    return env.now, net
