"""The plug-ins pkb's simulated world runs with: importing this module registers them (pkbsim/world/plugins.py).

Symmetric memory, device kernels (Triton) and inline CUDA. The entry points that run programs on the world
import it (`pkb check`: pkb/cli/check_cmd.py; the labelled corpora: pkb/corpus.py; taskrun.py for tasks and
the screen; the tests' conftest.py), never the world's core (pkbsim/world, pkbsim/standins: tests/test_layering.py checks it).
"""
from __future__ import annotations

from pkbsim.cuda import install as cuda
from pkbsim.device import install as device
from pkbsim.symm import install as symm

BUILT_IN = (symm.PLUGIN, device.PLUGIN, cuda.PLUGIN)
