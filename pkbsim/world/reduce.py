"""Reductions over the ranks' contributions, for every `torch.distributed.ReduceOp`."""
from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from pkbsim.errors import NotSimulated

RedOpType = dist.ReduceOp.RedOpType

_BITWISE = {RedOpType.BAND: torch.bitwise_and, RedOpType.BOR: torch.bitwise_or, RedOpType.BXOR: torch.bitwise_xor}


_NAMES = {op: str(op).split(".")[-1] for op in RedOpType.__members__.values()}


def op_name(op) -> str:
    return _NAMES.get(op) or str(op).split(".")[-1]


def reduce_tensors(tensors: list[torch.Tensor], op) -> torch.Tensor:
    """Reduce same-shaped tensors elementwise; floating sums accumulate in float32 like NCCL's kernels."""
    if op in _BITWISE:
        return functools.reduce(_BITWISE[op], tensors)
    stacked = torch.stack([t.reshape(tensors[0].shape) for t in tensors])
    if op == RedOpType.SUM:
        return stacked.sum(0, dtype=_acc(stacked.dtype)).to(stacked.dtype)
    if op == RedOpType.AVG:
        total = stacked.sum(0, dtype=_acc(stacked.dtype))
        return (total / len(tensors)).to(stacked.dtype) if stacked.is_floating_point() else total // len(tensors)
    if op == RedOpType.PRODUCT:
        return stacked.prod(0).to(stacked.dtype)
    if op == RedOpType.MIN:
        return stacked.amin(0)
    if op == RedOpType.MAX:
        return stacked.amax(0)
    raise NotSimulated(f"reduce op {op_name(op)}")


def _acc(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
