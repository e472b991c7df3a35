"""One collective on one machine: `pkb predict` and the fidelity report call this."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from pkbsim.timing.closed_form import choose
from pkbsim.timing.compute import local_copy_us
from pkbsim.timing.flowsim import simulate_plan
from pkbsim.timing.routes import Router
from pkbsim.timing.topology import Topology
from pkbsim.timing.units import bus_factor

ENGINES = ("closed", "flow")
_routers: dict = {}


def router_for(topo: Topology) -> Router:
    """Routes are computed once per machine and reused (Topology objects are cached by the loader)."""
    key = (topo.path, topo.name, topo.nodes)
    if key not in _routers:
        _routers[key] = Router(topo)
    return _routers[key]


@dataclass
class Prediction:
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str
    protocol: str
    channels: int
    op: str
    bytes: int
    nranks: int
    topology: str
    engine: str

    def to_json(self) -> dict:
        return asdict(self)


def predict(topo: Topology, op: str, nbytes: int, ranks: int | Sequence[int], algo: str | None = None,
            proto: str | None = None, engine: str = "closed", ctas: int | None = None) -> Prediction:
    """Time of `op` on GPUs `ranks` (an int n means GPUs 0..n-1, packed onto machines in order). Raises
    ValueError with a one-line reason for a size, rank set, algorithm or protocol that cannot run."""
    ranks = list(range(ranks)) if isinstance(ranks, int) else list(ranks)
    nranks = len(ranks)
    if nranks < 1 or len(set(ranks)) != nranks or not all(0 <= g < topo.num_gpus for g in ranks):
        raise ValueError(f"{topo.name} holds {topo.num_gpus} GPUs; choose between 1 and {topo.num_gpus} distinct ranks")
    if nbytes < 0:
        raise ValueError("size must not be negative")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use {' or '.join(ENGINES)}")
    if nranks == 1 and not algo:
        t = local_copy_us(topo, nbytes)
        algbw = nbytes / t / 1e3 if t else 0.0
        return Prediction(t, algbw, algbw * bus_factor(op, 1), "local", "Simple", 0, op, nbytes, 1, topo.name, engine)
    router = router_for(topo)
    choice = choose(topo, router, op, nbytes, ranks, algo, proto, ctas)
    t = choice.time_us if engine == "closed" else simulate_plan(choice.plan, router)[0]
    algbw = nbytes / t / 1e3 if t > 0 else 0.0
    p = choice.plan
    return Prediction(t, algbw, algbw * bus_factor(op, nranks), p.algorithm, p.protocol, p.channels, op, nbytes,
                      nranks, topo.name, engine)
