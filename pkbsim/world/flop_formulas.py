"""torch's FLOP formulas (`torch.utils.flop_counter.flop_registry`), without importing triton for them.

That module imports triton (0.2 s of every screening process) only to count the Triton kernels of compiled
graphs, which pkb never runs (compile_shim makes compiled code eager): it is imported here with triton hidden,
so that triton is imported only where a program imports it (the device plug-in patches it then). Where triton
was imported before, nothing is hidden.
"""
from __future__ import annotations

import sys


def _import_formulas():
    hide = "triton" not in sys.modules and "torch.utils.flop_counter" not in sys.modules
    if hide:
        sys.modules["triton"] = None   # `import triton...` raises ImportError: the module's own fallback
    try:
        from torch.utils.flop_counter import flop_registry
    finally:
        if hide and sys.modules.get("triton", 0) is None:
            del sys.modules["triton"]
    return flop_registry


flop_registry = _import_formulas()
