"""Bytes one aten op's GPU kernel moves in HBM, from the tensors its schema reads and writes.

The schema says which tensors an op takes, not what its kernel touches: an in-place op reads what it
overwrites (`add_`, `exp_`), a `*_like` factory reads nothing, a gather reads the elements it gathers and
not its whole source, an in-place scatter touches only the elements it scatters. Charged by the schema
alone, vocab_parallel_cross_entropy's local work was predicted 2.11x faster than the reference where an
H200 measured 1.33x.
"""
from __future__ import annotations

import torch

_aten = torch.ops.aten
_LIKE = {_aten.empty_like, _aten.zeros_like, _aten.ones_like, _aten.full_like, _aten.rand_like,
         _aten.randn_like, _aten.randint_like}
# in-place ops that overwrite without reading what was there
_OVERWRITE = {_aten.fill_, _aten.zero_, _aten.copy_, _aten.normal_, _aten.uniform_, _aten.random_,
              _aten.bernoulli_, _aten.exponential_, _aten.set_, _aten.resize_, _aten.resize_as_}
# source first, then indices: the kernel reads as many source elements as it writes
_GATHERS = {_aten.gather, _aten.index_select, _aten.embedding, _aten.take_along_dim}
# in place over the indexed elements only: they read the index and the source, write the source's size
_SCATTERS = {_aten.scatter_, _aten.scatter_add_, _aten.scatter_reduce_, _aten.index_add_, _aten.index_copy_,
             _aten.index_fill_, _aten.masked_scatter_}


def tensor_bytes(t) -> int:
    return t.numel() * t.element_size()


def nbytes(tensors) -> int:
    return sum(map(tensor_bytes, tensors))


def traffic(func, args, reads: list, writes: list, outs: list) -> tuple[int, int]:
    """(bytes read, bytes written) in HBM by the kernel of `func` (an aten OpOverload)."""
    packet = func.overloadpacket
    written = writes + outs
    if packet in _LIKE:
        return 0, nbytes(written)
    if packet in _GATHERS and reads and outs:
        source = args[0]
        others = [t for t in reads if t is not source]
        return nbytes(others) + sum(o.numel() for o in outs) * source.element_size(), nbytes(written)
    if packet in _SCATTERS and writes:
        others = [t for t in reads if all(t is not w for w in writes)]
        # the elements written: the source's, or, where a scalar is scattered, the index's (one each)
        moved = max((t.numel() for t in others if t.is_floating_point() or t.dtype == writes[0].dtype), default=0) \
            or max((t.numel() for t in others), default=0)
        return nbytes(others), moved * writes[0].element_size()
    in_place = func._schema.name.endswith("_") and packet not in _OVERWRITE
    return nbytes(reads) + (nbytes(writes) if in_place else 0), nbytes(written)
