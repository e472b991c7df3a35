"""DTensor sharding strategies for the CPU kernels that a simulated GPU's ops dispatch to.

A simulated rank computes on CPU tensors, so `F.scaled_dot_product_attention` on DTensors of a "cuda" mesh
reaches `aten._scaled_dot_product_flash_attention_for_cpu`, for which DTensor registers no sharding
strategy: the program would fail where it runs on a GPU. There SDPA reaches the CUDA flash or
memory-efficient kernel (flash for fp16/bf16, efficient for fp32 or with a mask), and DTensor shards both
the same way: everything replicated, heads sharded (dim 1 of q, k, v, the output and the log-sum-exp), or
the batch sharded (dim 0). The CPU flash kernel computes the same function with the same layouts
(output (B, H, L, E), log-sum-exp (B, H, L)), so the strategies below give it exactly those three
placements, for the forward and the backward kernel.

Why a strategy rather than another SDPA backend: the math backend is the only other CPU choice and DTensor
cannot run it (its causal mask is a plain tensor mixed with DTensors), and a backend chosen for DTensor
alone would change what plain CPU tensors compute.

The strategies answer only for a rank whose program made a "cuda" DeviceMesh: a program that shards over a
"cpu" mesh (gloo) gets torch's own NotImplementedError, as it does under torchrun. An attention mask (a
DTensor) is placed like q's heads or batch where it has that dimension, as DTensor places the CUDA
kernels' bias; but the CPU kernel takes the mask as a keyword argument, which DTensor does not
redistribute, so only a mask already placed that way is taken (exactly the GPU's layout); any other is
reported as not simulated rather than computed with a layout the GPU would not use.
"""
from __future__ import annotations

import sys
import threading

import torch

from pkbsim.errors import NotSimulated
from pkbsim.world.context import RankContext, current
from pkbsim.world.patching import Patches

aten = torch.ops.aten
_run_patches: Patches | None = None  # the run's patches, while one is under way
_lock = threading.Lock()


class MaskNotSimulated(NotSimulated, NotImplementedError):
    """NotImplementedError too: DTensor re-raises that unwrapped (any other error becomes a RuntimeError)."""


def _on_simulated_gpu(op) -> None:
    ctx = current()
    if ctx is None or not ctx.gpu_mesh:
        raise NotImplementedError(f"Operator {op} does not have a sharding strategy registered.")


def _strategy(op_schema, op, q_index: int, n_tensors: int, n_outputs: int):
    """The three placements of every tensor, for every mesh dimension; an attention mask takes the
    placement that matches q's heads or batch where it has that dimension, else it is replicated."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor._op_schema import OpStrategy
    from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy

    _on_simulated_gpu(op)
    mask = op_schema.kwargs_schema.get("attn_mask")
    if not isinstance(mask, OpStrategy):
        mask = None  # none, or a plain tensor, which DTensor rejects before it asks for a strategy
    q = op_schema.args_schema[q_index]
    need = {Replicate(): Replicate()}
    if mask is not None:
        m_shape = mask.strategies[0].output_spec.tensor_meta.shape
        offset = len(q.strategies[0].output_spec.tensor_meta.shape) - len(m_shape)
        for d in (0, 1):
            need[Shard(d)] = Shard(d - offset) if d >= offset and m_shape[d - offset] > 1 else Replicate()
    strategies = [[p] * (n_tensors + n_outputs) + ([need[p]] if mask is not None else [])
                  for p in (Replicate(), Shard(1), Shard(0))]
    mesh = op_schema.get_mesh_from_args(validate=False)
    result = expand_to_full_mesh_op_strategy(mesh, op_schema, strategies, input_index=n_outputs)
    if mask is None:
        return result
    # DTensor does not redistribute keyword arguments: keep the layouts that take the mask as it is
    current = tuple(mask.strategies[0].output_spec.placements)
    q_now = tuple(q.strategies[0].output_spec.placements)
    if any(p not in need for p in q_now) or tuple(need[p] for p in q_now) != current:
        raise MaskNotSimulated(f"not simulated: {op} with an attention mask placed {current} for q placed "
                               f"{q_now} on a simulated GPU (the CPU kernel takes the mask as a keyword "
                               f"argument, which DTensor does not redistribute); place the mask like q")
    result.strategies = [s for s in result.strategies if tuple(s.input_specs[-1].placements) == current]
    return result


def sdpa_cpu_flash_strategy(op_schema):
    """(q, k, v, dropout_p, is_causal, *, attn_mask, scale) -> (output, logsumexp)."""
    return _strategy(op_schema, aten._scaled_dot_product_flash_attention_for_cpu.default, 0, 3, 2)


def sdpa_cpu_flash_backward_strategy(op_schema):
    """(grad_out, q, k, v, out, logsumexp, dropout_p, is_causal, *, attn_mask, scale) -> (dq, dk, dv)."""
    return _strategy(op_schema, aten._scaled_dot_product_flash_attention_for_cpu_backward.default, 1, 6, 3)


def install_dtensor_ops(patches: Patches) -> None:
    """The strategies are registered when a rank first makes a "cuda" mesh (`on_gpu_mesh`): a run without
    one does not pay for importing DTensor. They are removed with the run's other patches."""
    patches.set(sys.modules[__name__], "_run_patches", patches)


def on_gpu_mesh(ctx: RankContext) -> None:
    ctx.gpu_mesh = True
    with _lock:
        if _run_patches is None:
            return
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor._op_schema import RuntimeSchemaInfo
        prop = DTensor._op_dispatcher.sharding_propagator
        info = RuntimeSchemaInfo(static_argnum=100, static_kwargkey=["attn_mask"])
        for op, fn in ((aten._scaled_dot_product_flash_attention_for_cpu.default, sdpa_cpu_flash_strategy),
                       (aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
                        sdpa_cpu_flash_backward_strategy)):
            if op in prop.op_strategy_funcs or op in getattr(prop, "op_single_dim_strategy_funcs", {}):
                continue  # torch has one of its own, or this run registered it already
            _run_patches.set_item(prop.op_strategy_funcs, op, fn)
            _run_patches.set_item(prop.op_to_schema_info, op, info)
