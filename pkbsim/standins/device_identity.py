"""A simulated rank's GPU looks like a GPU to the program, although its tensors are CPU tensors.

During a run, tensors answer `device`, `is_cuda`, `is_cpu` and `get_device()` to the program's own code as
on the GPU: the GPU the tensor was explicitly created on (`device="cuda:1"`), else the rank's GPU. A
tensor the program explicitly puts on the host (`.cpu()`, `.to("cpu")`, `device="cpu"`) is tagged and
answers as a CPU tensor. torch, Triton and pkbsim itself keep seeing the CPU device they compute with:
FakeTensor, torch.distributed, the Triton interpreter and the symmetric-memory stand-in choose code paths
by device, so the answer depends on the calling frame's module.
"""
from __future__ import annotations

import functools
import sys

import torch

from pkbsim.world.context import current
from pkbsim.world.patching import Patches

_INTERNAL = frozenset({"torch", "triton", "pkbsim", "functorch"})
_TAG = "_pkb_device"
HOST = torch.device("cpu")
_REAL_DEVICE = torch._C.TensorBase.device.__get__
_REAL_GET_DEVICE = torch._C.TensorBase.get_device


def bound_device(ctx) -> int:
    """The GPU a rank owns: the one it set, else the one it named in `device="cuda:i"` (NCCL binds a
    communicator to the tensors' device, not the current one), else its current one."""
    if ctx.device_set or ctx.explicit_device is None:
        return ctx.device_index
    return ctx.explicit_device


def program_frame(frame) -> bool:
    """Whether `frame` (mode plumbing frames above it skipped) runs the program's code, not a library's."""
    while frame is not None and frame.f_code.co_name == "__torch_function__":
        frame = frame.f_back
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name.partition(".")[0] not in _INTERNAL


def tagged(t) -> torch.device | None:
    return getattr(t, _TAG, None)


def tag(t, dev: torch.device) -> None:
    setattr(t, _TAG, dev)


def seen_device(t, real: torch.device, ctx) -> torch.device:
    """The device the program sees for a CPU tensor `t` of rank `ctx`."""
    if real.type != "cpu":
        return real
    return tagged(t) or _gpu(bound_device(ctx))


@functools.cache
def _gpu(index: int) -> torch.device:
    return torch.device("cuda", index)


def target_device(dev, ctx) -> torch.device:
    """The device that `device=dev` names on rank `ctx` ("cuda" is the current GPU; an int is a GPU)."""
    if isinstance(dev, int):
        return torch.device("cuda", dev)
    d = torch.device(dev)
    if d.type == "cuda":
        return torch.device("cuda", ctx.device_index if d.index is None else d.index)
    return HOST if d.type == "cpu" else d


def _seen(t, real: torch.device) -> torch.device:
    """What the accessor (two frames up: past the property) sees."""
    ctx = current()
    if ctx is None or real.type != "cpu" or not program_frame(sys._getframe(2)):
        return real
    return seen_device(t, real, ctx)


def _device(t):
    return _seen(t, _REAL_DEVICE(t))


def _is_cuda(t):
    return _seen(t, _REAL_DEVICE(t)).type == "cuda"


def _is_cpu(t):
    return _seen(t, _REAL_DEVICE(t)).type == "cpu"


def _get_device(t):
    d = _seen(t, _REAL_DEVICE(t))
    return d.index if d.type == "cuda" else _REAL_GET_DEVICE(t)


def install_device_identity(patches: Patches) -> None:
    """Answer device queries per calling thread and module for the length of a run."""
    from torch._subclasses.fake_tensor import FakeTensor

    patches.set(torch.Tensor, "device", property(_device))
    patches.set(torch.Tensor, "is_cuda", property(_is_cuda))
    patches.set(torch.Tensor, "is_cpu", property(_is_cpu))
    patches.set(torch.Tensor, "get_device", _get_device)
    fake_device = FakeTensor.__dict__["device"].fget  # a shape run's tensors carry their own `device`
    patches.set(FakeTensor, "device", property(lambda t: _seen(t, fake_device(t))))
