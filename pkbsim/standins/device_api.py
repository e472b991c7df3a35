"""The device API beyond torch.cuda, answered for the program as on a GPU machine (the CPU build of torch
has no accelerator): `torch.accelerator`, GPU indices given to `nn.Module.to`, and `torch.load` onto a GPU.

torch's own code keeps the CPU build's answers to `torch.accelerator` (device_identity.py says why).
"""
from __future__ import annotations

import sys

import torch
import torch.serialization
from torch.distributed.device_mesh import DeviceMesh
from torch.nn.parallel import DistributedDataParallel

from pkbsim.standins import cuda_shim
from pkbsim.world.context import current
from pkbsim.standins.device_identity import program_frame
from pkbsim.standins.dtensor_ops import on_gpu_mesh
from pkbsim.world.patching import Patches

_CUDA = torch.device("cuda")


def _for_program(stand_in, original):
    """`stand_in` on a rank's own code, `original` elsewhere."""
    def call(*args, **kwargs):
        if current() is not None and program_frame(sys._getframe(1)):
            return stand_in(*args, **kwargs)
        return original(*args, **kwargs)
    return call


def _gpu_index_to_cpu(original):
    """nn.Module.to(i) with a GPU index: the CPU build cannot parse an index without an accelerator."""
    def to(self, *args, **kwargs):
        if current() is not None:
            args = tuple("cuda:%d" % a if isinstance(a, int) and not isinstance(a, bool) else a for a in args)
            if isinstance(kwargs.get("device"), int):
                kwargs["device"] = "cuda:%d" % kwargs["device"]
        return original(self, *args, **kwargs)
    return to


def _restore_on_gpu(original):
    """torch.load onto "cuda[:i]" (map_location or the saved location) keeps the storage on the CPU."""
    def restore(storage, location):
        if current() is not None and str(location).startswith("cuda"):
            return storage
        return original(storage, location)
    return restore


def _mesh_on_simulated_gpus(original):
    """A DeviceMesh of "cuda" is built as a CPU mesh: its tensors live on the CPU here, and DTensor and FSDP
    move shards to the mesh's device type with torch's own code, which must see the CPU."""
    def init(self, device_type, *args, **kwargs):
        ctx = current()
        if ctx is not None and str(device_type).startswith("cuda"):
            device_type = "cpu"
            on_gpu_mesh(ctx)  # DTensor's strategies for the CPU kernels of GPU ops
        return original(self, device_type, *args, **kwargs)
    return init


def _ddp_on_simulated_gpus(original):
    """DDP(module, device_ids=[i]) of a module on a simulated GPU: torch sees a CPU module and refuses
    device_ids for it, so they are dropped (a CPU module replicates the same way)."""
    def init(self, module, device_ids=None, output_device=None, *args, **kwargs):
        if current() is not None:
            device_ids = output_device = None
        return original(self, module, device_ids, output_device, *args, **kwargs)
    return init


def install_device_api(patches: Patches, local_world_size: int) -> None:
    acc = torch.accelerator
    stand_ins = {
        "is_available": lambda *a, **k: True, "device_count": lambda: local_world_size,
        "current_accelerator": lambda *a, **k: _CUDA,
        "set_device_index": cuda_shim.set_device, "set_device_idx": cuda_shim.set_device,
        "current_device_index": cuda_shim.current_device, "current_device_idx": cuda_shim.current_device,
        "current_stream": cuda_shim.current_stream, "set_stream": cuda_shim.set_stream,
        "synchronize": cuda_shim.synchronize,
    }
    # torch's own code gets the CPU build's answers under either build: no accelerator. Under the CUDA build the
    # real ones name CUDA, and torch then asks the CUDA runtime (an optimizer's step asks for the current stream)
    cpu_build = {"is_available": lambda *a, **k: False, "current_accelerator": lambda *a, **k: None}
    for name, fn in stand_ins.items():
        if hasattr(acc, name):
            patches.set(acc, name, _for_program(fn, cpu_build.get(name, getattr(acc, name))))
    if hasattr(acc, "device_index"):
        patches.set(acc, "device_index", cuda_shim.device)
    patches.set(torch.nn.Module, "to", _gpu_index_to_cpu(torch.nn.Module.to))
    patches.set(DeviceMesh, "__init__", _mesh_on_simulated_gpus(DeviceMesh.__init__))
    patches.set(DistributedDataParallel, "__init__", _ddp_on_simulated_gpus(DistributedDataParallel.__init__))
    patches.set(torch.serialization, "default_restore_location",
                _restore_on_gpu(torch.serialization.default_restore_location))
