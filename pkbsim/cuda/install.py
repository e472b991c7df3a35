"""Route `torch.utils.cpp_extension.load_inline`/`load` to pkb's build while a program runs on the simulated
world (`pkb check`): the world's "cuda" plug-in (pkbsim/world/plugins.py). So unmodified torchrun scripts
that build an inline-CUDA extension run their kernels on the interpreter. `pkb screen` installs its own
stand-in first (which compile-checks and then uses the same build); that one is left in place. Without nvcc
the calls fail with one line saying why. Importing torch.utils.cpp_extension takes about half a second, so a program that
does not import it is not charged for it: the patch is applied by an import hook right after the program's
own import.
"""
from __future__ import annotations

import importlib.abc
import sys

from pkbsim.cuda.toolchain import unavailable
from pkbsim.device.install import PatchingLoader
from pkbsim.errors import CannotSimulate
from pkbsim.world.plugins import Plugin, register

MODULE = "torch.utils.cpp_extension"

class _ExtensionImportHook(importlib.abc.MetaPathFinder):
    def __init__(self, patches):
        self.patches = patches

    def find_spec(self, fullname, path, target=None):
        if fullname != MODULE:
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    spec.loader = PatchingLoader(spec.loader, lambda: _patch(self.patches))
                    return spec
        return None


def install_cuda_extensions(patches) -> None:
    if MODULE in sys.modules:
        _patch(patches)
    else:
        patches.set(sys, "meta_path", [_ExtensionImportHook(patches), *sys.meta_path])


def _patch(patches) -> None:
    cpp = sys.modules[MODULE]
    if getattr(cpp.load_inline, "pkb_stand_in", False):
        return
    why = unavailable()
    if why is not None:
        def refuse(*args, **kwargs):
            raise CannotSimulate(why)
        patches.set(cpp, "load_inline", refuse)
        patches.set(cpp, "load", refuse)
        return
    from pkbsim.cuda import extension

    patches.set(cpp, "load_inline", extension.load_inline)
    patches.set(cpp, "load", extension.load)


PLUGIN = register(Plugin("cuda", install_cuda_extensions))
