"""CPU kernels for the `torch.ops.symm_mem` operators that programs commonly call.

Each operator is a collective on its group in PyTorch (its kernel starts and ends with a barrier over
the peers' signal pads), so here each is matched like one: by issue order, with op, size and dtype
checked, then computed from every rank's symmetric buffer at once.
"""
from __future__ import annotations

import torch

from pkbsim.device import lower_symm
from pkbsim.symm.api import allocation_of
from pkbsim.world.comms import behind_the_program, resolve_comm
from pkbsim.world.context import current, require
from pkbsim.world.findings import Finding
from pkbsim.world.reduce import RedOpType, reduce_tensors
from pkbsim.world.sites import user_site
from pkbsim.world.world import SimAbort

_REDUCE = {"sum": RedOpType.SUM, "avg": RedOpType.AVG, "max": RedOpType.MAX, "min": RedOpType.MIN}
_registered = False


def _collective(name: str, group_name: str, signature: tuple, arg, compute, symm_inputs=(), moved=()):
    """Match one symm_mem op across the group and run `compute(args_by_group_rank)` once. The trace's
    bytes are those of the symmetric inputs, or of `moved` (what a fused op communicates)."""
    ctx = require()
    site = user_site()
    for t in symm_inputs:
        if allocation_of(ctx, t) is None:
            msg = f"symm_mem.{name} at {site}: its input is not a symmetric-memory tensor (use symm_mem.empty)"
            ctx.world.fail(Finding("protocol", msg, [ctx.rank], [site]))
            raise SimAbort(msg)
    comm = resolve_comm(ctx, group_name)
    lower_symm.on_symm_op(ctx, name, site)

    def execute(args):
        with behind_the_program():
            return compute(args)
    op = ctx.engine.post_collective(comm, ctx.rank, f"symm_mem.{name}", signature, arg, execute,
                                    f"symm_mem.{name}", site)
    ctx.trace.record("symm", name, site, group=comm.name, seq=op.seq, group_ranks=comm.ranks,
                     shapes=[list(t.shape) for t in symm_inputs or moved],
                     bytes=sum(t.numel() * t.element_size() for t in symm_inputs or moved))
    ctx.engine.wait(ctx.rank, [op])
    return op.slot.result


def _red(op: str):
    if op not in _REDUCE:
        raise ValueError(f"unsupported reduce_op {op!r}")
    return _REDUCE[op]


def one_shot_all_reduce_out(input, reduce_op, group_name, out):
    red = _red(reduce_op)

    def compute(args):
        total = reduce_tensors([a[0] for a in args], red)
        for _, o in args:
            o.copy_(total.reshape(o.shape))
    _collective("one_shot_all_reduce", group_name, (input.numel(), input.dtype, reduce_op), (input, out), compute,
                [input])
    return out


def one_shot_all_reduce(input, reduce_op, group_name):
    return one_shot_all_reduce_out(input, reduce_op, group_name, torch.empty_like(input))


def two_shot_all_reduce_(input, reduce_op, group_name):
    red = _red(reduce_op)

    def compute(args):
        total = reduce_tensors(list(args), red)
        for t in args:
            t.copy_(total.reshape(t.shape))
    _collective("two_shot_all_reduce_", group_name, (input.numel(), input.dtype, reduce_op), input, compute, [input])
    return input


def multimem_all_reduce_(input, reduce_op, group_name):
    return two_shot_all_reduce_(input, reduce_op, group_name)


def fused_all_gather_matmul(A, Bs, gather_dim, group_name, *, return_A=True):
    full = _collective("fused_all_gather_matmul", group_name, (tuple(A.shape), A.dtype, gather_dim), A,
                       lambda args: torch.cat(list(args), dim=gather_dim), moved=[A]).clone()
    return (full if return_A else None), [torch.matmul(full, B) for B in Bs]


def fused_matmul_reduce_scatter(A, B, reduce_op, scatter_dim, group_name):
    red = _red(reduce_op)
    ctx = require()
    partial = torch.matmul(A, B)
    comm = resolve_comm(ctx, group_name)
    chunks = _collective("fused_matmul_reduce_scatter", group_name,
                         (tuple(partial.shape), partial.dtype, reduce_op, scatter_dim), partial,
                         lambda args: reduce_tensors(list(args), red).chunk(len(args), dim=scatter_dim),
                         moved=[partial])
    return chunks[comm.group_rank[ctx.rank]].clone()


def get_remote_tensors(x, group_name):
    from pkbsim.symm.api import rendezvous
    hdl = rendezvous(x, group_name)
    return [hdl.get_buffer(r, list(x.shape), x.dtype, x.storage_offset()) for r in range(hdl.world_size)]


def memset32_(input, offset, val, count):
    _words(input)[offset:offset + count] = val
    _notify()
    return input


def stream_write_value32_(input, offset, val):
    _words(input)[offset] = val
    _notify()
    return input


def _words(t: torch.Tensor) -> torch.Tensor:
    if t.dtype not in (torch.int32, torch.uint32):
        raise ValueError(f"expected an int32/uint32 tensor, got {t.dtype}")
    return t.view(torch.int32).reshape(-1)


def _notify() -> None:
    ctx = current()
    if ctx is not None:
        with ctx.world.lock:
            ctx.world.changed()


def register_cpu_kernels() -> None:
    """Register the CPU implementations once per process (the schemas ship with torch)."""
    global _registered
    if _registered:
        return
    lib = torch.library.Library("symm_mem", "IMPL")
    impls = {
        "one_shot_all_reduce": one_shot_all_reduce, "one_shot_all_reduce_out": one_shot_all_reduce_out,
        "two_shot_all_reduce_": two_shot_all_reduce_, "multimem_all_reduce_": multimem_all_reduce_,
        "multimem_one_shot_all_reduce": one_shot_all_reduce,
        "fused_all_gather_matmul": fused_all_gather_matmul,
        "fused_matmul_reduce_scatter": fused_matmul_reduce_scatter,
        "get_remote_tensors": get_remote_tensors, "memset32_": memset32_,
        "stream_write_value32_": stream_write_value32_,
    }
    for name, fn in impls.items():
        if hasattr(torch.ops.symm_mem, name):
            lib.impl(name, fn, "CPU")
    register_cpu_kernels.lib = lib  # keep the registrations alive
    _registered = True
