"""One collective on one machine: `pkb predict` and the fidelity report call this."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from pkbsim.timing.closed_form import choose
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


def predict(topo: Topology, op: str, nbytes: int, nranks: int, algo: str | None = None, proto: str | None = None,
            engine: str = "closed", ctas: int | None = None) -> Prediction:
    """Time of `op` over ranks 0..nranks-1 (packed onto machines in order). Raises ValueError for a size,
    rank count, algorithm or protocol that cannot run, with a one-line reason."""
    if not 1 <= nranks <= topo.num_gpus:
        raise ValueError(f"{topo.name} holds {topo.num_gpus} GPUs; choose --nranks between 1 and {topo.num_gpus}")
    if nbytes < 0:
        raise ValueError("size must not be negative")
    router = router_for(topo)
    choice = choose(topo, router, op, nbytes, list(range(nranks)), algo, proto, ctas)
    t = choice.time_us if engine == "closed" else simulate_plan(choice.plan, router)[0]
    algbw = nbytes / t / 1e3 if t > 0 else 0.0
    p = choice.plan
    return Prediction(t, algbw, algbw * bus_factor(op, nranks), p.algorithm, p.protocol, p.channels, op, nbytes,
                      nranks, topo.name, engine)
