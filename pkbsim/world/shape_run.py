"""What a shape run (`--shape-run`, FakeTensorMode) needs beyond fake tensors.

`model.to(device)` on a module built under FakeTensorMode swaps each parameter with its converted self
(`torch.utils.swap_tensors`), which refuses a fake parameter that torch's fake-tensor memo holds a weak reference
to ("_apply(): Couldn't swap Embedding.weight", also without pkb). On a simulated rank the move to the rank's own
GPU changes nothing: the converted parameter is a view of the same fake storage with the same shape, strides,
dtype and device. Such a swap is skipped (it would exchange two equal descriptions of one tensor); any other swap
is torch's.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor

from pkbsim.world.patching import Patches


def _same(t1, t2) -> bool:
    return (isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor)
            and t1.untyped_storage()._cdata == t2.untyped_storage()._cdata
            and t1.shape == t2.shape and t1.stride() == t2.stride() and t1.storage_offset() == t2.storage_offset()
            and t1.dtype == t2.dtype and t1.device == t2.device and t1.requires_grad == t2.requires_grad)


def _swap(real):
    def swap_tensors(t1, t2):
        if _same(t1, t2):
            return None
        return real(t1, t2)
    return swap_tensors


def install_shape_run(patches: Patches) -> None:
    patches.set(torch.utils, "swap_tensors", _swap(torch.utils.swap_tensors))
