"""A per-rank TorchDispatchMode that sees every tensor operation of the rank's program.

It serves these purposes, each switched on only when needed (the mode costs ~15 us per op):
- the compute trace: FLOPs (torch's flop formulas), bytes read and written, and bytes read from or
  written to each peer's memory (as the plug-ins that own such memory count them);
- stream ordering (see streams.py): writes per stream, and reads racing with another stream's write;
- the plug-ins' own checks (plugins.OpsWatch): symmetric memory's host accesses and signal-pad writes;
- host reads of device data (`.item()`, an output shape that depends on data): host waits (host_sync.py).
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import _pop_mode, _push_mode

from pkbsim.world import host_sync
from pkbsim.world.flop_formulas import flop_registry
from pkbsim.world.eager_mode import EagerDispatchMode
from pkbsim.world.comms import is_fake, resolve_comm, storage_key
from pkbsim.world.findings import Finding
from pkbsim.timing.kernel_path import kernel_path, path_launch
from pkbsim.timing.op_bytes import nbytes, traffic
from pkbsim.timing.op_kernels import Launch, fused_launches, launches
from pkbsim.world.plugins import registered
from pkbsim.timing.reuse import ReuseTracker
from pkbsim.world.sites import user_site
from pkbsim.world.streams import StreamOrder
from pkbsim.world.trace import moved_by
from pkbsim.world.world import SimAbort
from tasks.api import flat_tensors

_SKIP = {torch.ops.aten.detach.default, torch.ops.aten.lift_fresh.default, torch.ops.aten.set_.source_Storage_storage_offset,
         # queries of metadata: no kernel runs (a CPU decomposition asks prim.device of a whole tensor)
         torch.ops.prim.device.default, torch.ops.aten.is_same_size.default, torch.ops.aten.sym_size.int,
         torch.ops.aten.sym_stride.int, torch.ops.aten.sym_numel.default, torch.ops.aten.sym_storage_offset.default}


# symm_mem's fused matmul ops -> their FLOPs from (args, out): the CPU build's flop counter has no formula
_FUSED_MATMULS = {
    "symm_mem::fused_all_gather_matmul":   # (A shard, [B...], gather_dim, group) -> (A?, [A_full @ B...])
        lambda args, out: sum(2 * o.numel() * b.shape[0] for b, o in zip(args[1], out[1])),
    "symm_mem::fused_matmul_reduce_scatter":  # (A, B, reduce_op, scatter_dim, group) -> scattered A @ B
        lambda args, out: 2 * args[0].numel() * args[1].shape[-1],
}


# symm_mem all-reduces (input, reduce_op, group_name[, out]) -> their output, for shape runs (no meta kernel)
_SYMM_ALL_REDUCES = {
    "symm_mem::one_shot_all_reduce": lambda args: torch.empty_like(args[0]),
    "symm_mem::one_shot_all_reduce_out": lambda args: args[3],
    "symm_mem::two_shot_all_reduce_": lambda args: args[0],
    "symm_mem::multimem_all_reduce_": lambda args: args[0],
}


# ops that make CUDA copy data to the host and wait for it: a scalar read, or an output sized by the data
_aten = torch.ops.aten
_HOST_READS = {_aten._local_scalar_dense, _aten.equal, _aten.allclose, _aten.nonzero, _aten.masked_select,
               _aten._unique, _aten._unique2, _aten.unique_dim, _aten.unique_consecutive, _aten.bincount,
               _aten.repeat_interleave}
_MASK_INDEXED = {_aten.index, _aten.index_put, _aten.index_put_, _aten._index_put_impl_}  # with a bool mask


def _reads_on_host(func, args) -> bool:
    packet = func._overloadpacket
    if packet in _HOST_READS:
        return packet is not _aten.repeat_interleave or isinstance(args[0 if len(args) == 1 else 1], torch.Tensor)
    return packet in _MASK_INDEXED and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                                           for i in (args[1] if len(args) > 1 else ()) or ())


def _is_view(func) -> bool:
    return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)


class RankOpsMode(EagerDispatchMode):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.record_compute = ctx.trace.enabled and ctx.record_compute
        self.watches = [p.ops for p in registered() if p.ops is not None]
        self.streams: StreamOrder | None = None
        self.fused_flops: int | None = None   # inside a call that CUDA runs as one kernel (fused_calls.py)
        self.reuse = ReuseTracker()

    def track_streams(self) -> StreamOrder:
        if self.streams is None:
            self.streams = StreamOrder()
        return self.streams

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _SKIP or _is_view(func):
            return func(*args, **kwargs)
        reads, writes = [], []
        for arg, val in zip(func._schema.arguments, list(args) + [kwargs.get(a.name) for a in
                                                                  func._schema.arguments[len(args):]]):
            for t in flat_tensors(val):
                (writes if arg.alias_info is not None and arg.alias_info.is_write else reads).append(t)
        shape_only = _SYMM_ALL_REDUCES.get(func._schema.name)
        if shape_only is not None and is_fake(args[0]):
            return self._shape_run_all_reduce(func._schema.name, shape_only, args)
        if _reads_on_host(func, args):
            host_read(self.ctx)
        for watch in self.watches:
            watch.before(self.ctx, reads, writes, func.__name__)
        out = func(*args, **kwargs)
        self._after(func, args, kwargs, out, reads, writes)
        return out

    def _after(self, func, args, kwargs, out, reads, writes) -> None:
        if writes:
            for watch in self.watches:
                watch.after(self.ctx, writes)
        if self.streams is not None:
            self.check_stream_order(reads, writes + flat_tensors(out), func.__name__)
        if self.record_compute:
            self._record(func, args, kwargs, out, reads, writes)

    def check_stream_order(self, reads, writes, what: str) -> None:
        ctx, so = self.ctx, self.streams
        s = ctx.stream_id
        site = user_site()
        for t in reads:
            w = so.race(storage_key(t), s)
            if w is not None:
                msg = (f"rank {ctx.rank} reads a buffer in {what} on stream {s} at {site}, but stream {w[0]} wrote "
                       f"it at {w[2]} and stream {s} never waited for it (add {'s' if s else 'the stream'}"
                       f".wait_stream(...) or an event)")
                ctx.world.fail(Finding("race", msg, [ctx.rank], [site, w[2]]), unless_failed=True)
                raise SimAbort(msg)
        for t in writes:
            so.write(storage_key(t), s, site)

    def _record(self, func, args, kwargs, out, reads, writes) -> None:
        flops = 0
        fused = _FUSED_MATMULS.get(func._schema.name)
        if fused is not None:
            self._record_fused_matmul(func._schema.name.split("::")[1], fused, args, out)
            return
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            try:
                flops = int(formula(*args, **kwargs, out_val=out))
            except Exception:
                flops = 0
        if self.fused_flops is not None:
            self.fused_flops += flops
            return
        outs = flat_tensors(out) if not writes else []
        moved = traffic(func, args, reads, writes, outs)
        self._emit(str(func.overloadpacket.__name__), flops, reads, writes + outs, moved,
                   kernel_path(func, reads, writes + outs), launches(func, args, writes + outs, moved))

    def _shape_run_all_reduce(self, name: str, result, args):
        """A symm_mem all-reduce in a shape run, which has no meta kernel for it: the collective goes on the
        trace as the CPU kernel records it at screen size, and the output is the input's shape."""
        comm = resolve_comm(self.ctx, args[2])
        x = args[0]
        self.ctx.trace.record("symm", name.split("::")[1].replace("_out", ""), user_site(),
                              stream=self.ctx.stream_id, group=comm.name, group_ranks=comm.ranks,
                              shapes=[list(x.shape)], bytes=x.numel() * x.element_size())
        return result(args)

    def _record_fused_matmul(self, name: str, flops_of, args, out) -> None:
        """symm_mem's fused all-gather+matmul / matmul+reduce-scatter: one kernel with the matmul's FLOPs. At
        screen size the simulated op records its communication itself (symm/ops.py); a shape run only reaches
        the op's meta kernel, so its communication is recorded here, with the sizes the CPU kernel records."""
        tensors = flat_tensors(args)
        self._emit(name, int(flops_of(args, out)), tensors, flat_tensors(out))
        if any(map(is_fake, tensors)):
            comm = resolve_comm(self.ctx, args[-1] if name == "fused_matmul_reduce_scatter" else args[3])
            sent = out if name == "fused_matmul_reduce_scatter" else args[0]
            nbytes = sent.numel() * sent.element_size() * (len(comm.ranks) if sent is out else 1)
            self.ctx.trace.record("symm", name, user_site(), stream=self.ctx.stream_id, group=comm.name,
                                  group_ranks=comm.ranks, shapes=[list(sent.shape)], bytes=nbytes)

    def record_fused(self, name: str, flops: int, inputs, out) -> None:
        """One kernel for a call that the CPU build ran as several ops: it reads its inputs and writes its
        output once."""
        reads, writes = flat_tensors(inputs), flat_tensors(out)
        self._emit(name, flops, reads, writes, kernels=fused_launches(name, inputs, reads, writes))

    def _emit(self, name: str, flops: int, reads, writes, moved: tuple[int, int] | None = None,
              path: str | None = None, kernels: list[Launch] | None = None) -> None:
        """An op of the compute trace; `moved`: its (read, written) HBM bytes where they are not all of
        `reads` and `writes` (op_bytes.traffic); `path`: an elementwise op's slower CUDA path (kernel_path);
        `kernels`: the launches CUDA runs for it where that is not one elementwise pass (op_kernels), whose
        bytes then make the op's."""
        ctx = self.ctx
        rd, wr = moved or (nbytes(reads), nbytes(writes))
        if kernels:
            rd, wr = sum(k.read for k in kernels), sum(k.written for k in kernels)
        peer_read: dict[int, int] = {}
        peer_write: dict[int, int] = {}
        for watch in self.watches:
            for bucket, ts in ((peer_read, reads), (peer_write, writes)):
                for peer, n in watch.peer_bytes(ctx, ts).items():
                    bucket[peer] = bucket.get(peer, 0) + n
        floating = [t for t in reads + writes if t.is_floating_point()]
        fields = {"flops": flops, "bytes_read": rd, "bytes_written": wr}
        if floating:  # the timing engine picks the GPU's peak rate for this dtype
            fields["dtype"] = str(floating[0].dtype).replace("torch.", "")
        if path:   # its time goes by the elements it writes and the steps of a thread (compute.kernel_us)
            fields.update(path_launch(path, reads, writes))
        if kernels:
            fields["kernels"] = [k.record() for k in kernels]
        if peer_read or peer_write:
            fields["peer_bytes"] = {"read": peer_read, "write": peer_write}
        # an in-place op (add_, scatter_add_) reads the tensor it updates
        fields["reuse_bytes"] = self.reuse.distance(ctx.trace.moved, reads + writes if name.endswith("_") else reads)
        ctx.trace.record("compute", name, user_site(), stream=ctx.stream_id, **fields)
        self.reuse.touch(ctx.trace.moved, reads + writes, moved_by("compute", name, fields))


def ensure_ops_mode(ctx) -> RankOpsMode:
    """Push the rank's ops mode once (on the calling rank thread) and return it."""
    mode = ctx.ops_mode
    if mode is None:
        mode = ctx.ops_mode = RankOpsMode(ctx)
        _push_beneath(mode)
    return mode


def _push_beneath(mode: RankOpsMode) -> None:
    """Push `mode` under the dispatch modes active now. It is pushed lazily, maybe inside another mode's
    `with` (the screen's input budget, PoisonEmpty); that mode's exit pops the top of the stack, which
    would be this one: the rank would run on unchecked, the other mode left active for good."""
    above = [_pop_mode() for _ in range(torch._C._len_torch_dispatch_stack())]
    mode.__enter__()
    for m in reversed(above):
        _push_mode(m)


def host_wait(ctx, stream: int | None = None) -> None:
    """The rank's host waited for `stream` (None: every stream). Stream tracking starts here if it has not:
    the writes so far are complete, so a stream created later may read them without waiting."""
    so = ensure_ops_mode(ctx).track_streams()
    so.synchronize() if stream is None else so.host_wait(stream)


def host_read(ctx) -> None:
    """The program read device data on the host (`.item()`, `.tolist()`, `.cpu()`, an output sized by data):
    CUDA waits for the current stream first. Reads made while a kernel is interpreted are the interpreter's."""
    if ctx.world.clocks.in_kernel(ctx.rank):
        return
    host_wait(ctx, ctx.stream_id)
    host_sync.wait_streams(ctx, [ctx.stream_id])
