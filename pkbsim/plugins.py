"""The plug-ins pkb's simulated world runs with: importing this module registers them (pkbsim/world/plugins.py).

Symmetric memory, device kernels (Triton) and inline CUDA; the entry points that run programs on the world
(world/check.py for `pkb check`, taskrun.py for tasks and the screen) import it.
"""
from __future__ import annotations

from pkbsim.cuda import install as cuda
from pkbsim.device import install as device
from pkbsim.symm import install as symm

BUILT_IN = (symm.PLUGIN, device.PLUGIN, cuda.PLUGIN)
