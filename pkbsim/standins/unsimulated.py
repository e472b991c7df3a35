"""Entry points of work the simulated world does not do: on a rank each ends the run as not simulated
(inconclusive), naming itself, instead of failing later in a way that would be blamed on the program.

- `torch.multiprocessing.spawn` / `start_processes`: the script launches its own worker processes (the
  `python main.py` form of pytorch/examples' ddp-tutorial multigpu.py and rpc/ folder). Those processes
  would be real ones, outside the simulation, and the CPU build of torch fails in them (pickling a
  simulated rank's state, no GPU); pkb check runs a torchrun script's ranks.
- `torch.distributed.rpc.init_rpc`: RPC, RRefs, remote modules and distributed autograd are not
  simulated; a real TensorPipe agent must not come into being under pkb.
"""
from __future__ import annotations

import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

from pkbsim.errors import NotSimulated
from pkbsim.world.context import current
from pkbsim.world.patching import Patches

_WHY = {
    "torch.multiprocessing.spawn": "the script starts its own worker processes, and pkb check simulates the "
                                   "ranks that torchrun starts, one process per rank reading RANK and WORLD_SIZE",
    "torch.multiprocessing.start_processes": "the script starts its own worker processes, and pkb check "
                                             "simulates the ranks that torchrun starts",
    "torch.distributed.rpc.init_rpc": "RPC, RRefs and distributed autograd are not simulated",
}


def refuse_on_ranks(name: str, original, why: str = ""):
    """`original` off the simulated ranks; on a rank, the run ends as not simulated, naming the call."""
    def call(*args, **kwargs):
        if current() is None:
            return original(*args, **kwargs)
        raise NotSimulated(f"not simulated: {name}" + (f": {why}" if why else ""))
    return call


def install_unsimulated(patches: Patches) -> None:
    for module, attr, name in ((mp, "spawn", "torch.multiprocessing.spawn"),
                               (mp, "start_processes", "torch.multiprocessing.start_processes"),
                               (rpc, "init_rpc", "torch.distributed.rpc.init_rpc")):
        if hasattr(module, attr):
            patches.set(module, attr, refuse_on_ranks(name, getattr(module, attr), _WHY[name]))
