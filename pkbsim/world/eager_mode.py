"""The base of pkb's own TorchDispatchModes (the rank's ops mode, the budgets, the poison fill).

torch wraps a mode's `__torch_dispatch__` in `torch._dynamo.disable` unless the mode's class says to skip
that, and the wrapper imports torch._dynamo (1-5 s) at the first op. Nothing compiles on simulated ranks
(compile_shim.py forces eager where a program asks), so pkb's modes say skip: a world that never compiles
never imports dynamo (tests/test_compile_shim_lazy.py).
"""
from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode


class EagerDispatchMode(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False
