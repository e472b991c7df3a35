"""torch.compile and FlexAttention on simulated ranks.

A simulated GPU is the CPU, so inductor would compile the program's graphs for the CPU (or fail on the simulated
GPU's properties: "'DeviceProperties' object has no attribute 'gcnArchName'"), minutes per rank on a small
machine. What pkb checks (the order of communication on each rank) is the program's own: for the length of a run
torch.compile's stance is "force_eager" (`torch.compiler.set_stance`), so `torch.compile(model)` still returns
its wrapper (an OptimizedModule, state-dict keys with `_orig_mod.`), but it runs the program's code eagerly.
(Inductor's optional passes that reorder collectives are not modelled.)

FlexAttention has no backward on the CPU in torch ("FlexAttention does not support backward on CPU"); on a
GPU it has. For a rank's GPU tensors (not those the program moved to the host) that check is lifted, and on a
rank the attention is torch's own dense implementation of it (`sdpa_dense`, what the operator runs eagerly),
differentiated by plain autograd: the operator's autograd would trace its joint graph with make_fx, whose
tracer patches torch.nn.Module process-wide while it runs, under the feet of the other ranks' threads.
"""
from __future__ import annotations

import importlib

from pkbsim.world.context import current
from pkbsim.standins.cuda_shim import _on_gpu
from pkbsim.standins.on_import import when_imported
from pkbsim.world.patching import Patches


def _flex_validate_device(real):
    def _validate_device(query, key, value):
        if current() is not None and query.device.type == "cpu" and _on_gpu(query):
            return None   # a simulated GPU's tensor: the GPU has the backward
        return real(query, key, value)
    return _validate_device


def _flex_attention_op(real):
    from torch._higher_order_ops.flex_attention import sdpa_dense

    def flex_attention_hop(*args, **kwargs):
        if current() is None:
            return real(*args, **kwargs)
        return sdpa_dense(*args, **kwargs)
    return flex_attention_hop


_EVAL_FRAME = "torch._dynamo.eval_frame"


def _force_eager(patches: Patches, eval_frame) -> None:
    # process-wide, as the rank threads need it (torch.compiler.set_stance sets the same module global)
    patches.set(eval_frame, "_stance", eval_frame.DynamoStance(stance="force_eager"))


def install_compile_shim(patches: Patches) -> None:
    """Importing torch._dynamo costs about a second (several on a loaded machine), in the screening process and
    again in every candidate's, and most programs never compile: the stance is set when the program imports
    dynamo during a run (torch.compile, torch._dynamo, torch.compiler.set_stance all import its eval_frame),
    right after that module runs and before the import returns (on_import.py)."""
    when_imported(patches, _EVAL_FRAME, lambda eval_frame: _force_eager(patches, eval_frame))
    flex = importlib.import_module("torch.nn.attention.flex_attention")
    patches.set(flex, "_validate_device", _flex_validate_device(flex._validate_device))
    patches.set(flex, "flex_attention_hop", _flex_attention_op(flex.flex_attention_hop))
