"""Make Triton kernels run on simulated ranks, without importing triton unless the program does.

This is the world's "device" plug-in (pkbsim/world/plugins.py): the launcher runs `install_device_support`
once per run. When triton is already imported it patches it at once; otherwise an import hook patches it
right after the program first imports it (importing triton takes about a second). Without triton
installed, the program's `import triton` fails with one line saying how to install it.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys

from pkbsim.world.plugins import Plugin, register

MISSING = ("triton is not installed: pkb runs Triton kernels under Triton's CPU interpreter; "
           "install it with pip install 'pkb[triton]' (triton 3.6)")


def patch_triton(patches) -> None:
    from pkbsim.device.triton_launch import patch_launches
    from pkbsim.device.triton_memory import patch_memory

    patch_launches(patches)
    patch_memory(patches)


class _TritonImportHook(importlib.abc.MetaPathFinder):
    """Finds `triton` with the other finders and patches it once its top-level module has run."""

    def __init__(self, patches):
        self.patches = patches

    def find_spec(self, fullname, path, target=None):
        if fullname != "triton":
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        if spec is None and _imported_by_the_program():
            raise ModuleNotFoundError(MISSING, name="triton")
        if spec is None:
            return None
        spec.loader = PatchingLoader(spec.loader, lambda: patch_triton(self.patches))
        return spec


def _imported_by_the_program() -> bool:
    """True for the program's own `import triton`; torch probing for triton must just see it missing."""
    from pkbsim.world.sites import _is_plumbing
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename.startswith("<frozen") or frame.f_code.co_filename == __file__):
        frame = frame.f_back
    return frame is not None and not _is_plumbing(frame.f_code.co_filename)


class PatchingLoader(importlib.abc.Loader):
    """Runs a module as its own loader would, then `on_loaded()` (which patches it)."""

    def __init__(self, inner, on_loaded):
        self.inner, self.on_loaded = inner, on_loaded

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.on_loaded()


def install_device_support(patches) -> None:
    if "triton" in sys.modules:
        patch_triton(patches)
    else:
        patches.set(sys, "meta_path", [_TritonImportHook(patches), *sys.meta_path])


PLUGIN = register(Plugin("device", install_device_support))
