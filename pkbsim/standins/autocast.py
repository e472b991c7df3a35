"""Autocast on a simulated GPU.

A rank's GPU tensors are CPU tensors, which `torch.autocast("cuda", dtype)` leaves alone: a float16 input met a
float32 weight ("mat1 and mat2 must have the same dtype", accelerate's fp16 training) where the GPU casts both.
On a simulated rank, autocast for "cuda" is autocast for the CPU with the same dtype and settings (the CPU's
autocast casts the same ops to lower precision; its op lists are torch's for the CPU).
"""
from __future__ import annotations

import torch

from pkbsim.world.context import current
from pkbsim.world.patching import Patches


def _init(real):
    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if current() is not None and device_type == "cuda":
            device_type = "cpu"
            if dtype is None:
                dtype = torch.get_autocast_dtype("cuda")
        real(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
    return __init__


def install_autocast(patches: Patches) -> None:
    cls = torch.amp.autocast_mode.autocast
    patches.set(cls, "__init__", _init(cls.__init__))
