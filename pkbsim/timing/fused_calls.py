"""Calls that a CUDA build of torch runs as one kernel but the CPU build the simulator runs on decomposes
into several aten ops. Traced op by op, such a call would be charged one memory pass per op; the compute
trace records it as the one kernel the GPU runs instead.

Measured on an H200 (torch 2.11, benchmarks/single_gpu_model_check.py): `F.rms_norm` on an
8192 x 8192 fp32 tensor is one `vectorized_layer_norm_kernel` (195 us), where the CPU build dispatches
pow, mean, add, rsqrt and mul (the same five kernels, 411 us, when a program spells RMSNorm out).
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

FUSED_ON_CUDA = {torch.nn.functional.rms_norm: "rms_norm", torch.rms_norm: "rms_norm"}


class FusedCallsMode(TorchFunctionMode):
    """Pushed on a rank thread while its compute is traced: the ops inside a fused call add their FLOPs to
    one record instead of a record each."""

    def __init__(self, ops_mode):
        super().__init__()
        self.ops = ops_mode

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = FUSED_ON_CUDA.get(func)
        if name is None or self.ops.fused_flops is not None:
            return func(*args, **kwargs)
        self.ops.fused_flops = 0
        try:
            out = func(*args, **kwargs)
        finally:
            flops, self.ops.fused_flops = self.ops.fused_flops, None
        self.ops.record_fused(name, flops, list(args) + list(kwargs.values()), out)
        return out
