"""`SimProcessGroup`: the torch.distributed backend of the simulated world.

Registered as backend "sim" (extended API, devices cpu and cuda); every collective and point-to-point
call of torch.distributed, the functional collectives and DeviceMesh reach these methods. Each method
posts one operation to the engine and returns a `SimWork` whose wait() blocks through the world.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from pkbsim.errors import NotSimulated
from pkbsim.world import host_sync
from pkbsim.world.comms import Comm, Op, behind_the_program, is_fake
from pkbsim.world.context import current, require
from pkbsim.world.findings import Finding
from pkbsim.world.reduce import op_name, reduce_tensors
from pkbsim.world.sites import user_site
from pkbsim.world.trace import describe
from pkbsim.world.world import SimAbort
from tasks.api import flat_tensors

BACKEND_NAME = "sim"


class CollectiveMismatch(Exception):
    """Raised by an executor when the ranks' pieces of one collective do not fit together."""


class SimWork(dist.distributed_c10d.Work):
    def __init__(self, ctx, ops: list[Op], site: str, result: Any = None, stream: int = 0):
        super().__init__()
        self._rank, self._ops, self._batch, self._result, self._stream = ctx.rank, ops, ctx.batch, result, stream
        self._site = site
        self._host_waits = False
        ctx.unwaited[id(self)] = self

    def _pending(self) -> list[Op]:
        return self._batch.ops if self._batch is not None else self._ops

    def wait(self, timeout=None) -> bool:
        ctx = require()
        pending = self._pending()
        if not all(op.done for op in pending):
            ctx.engine.wait(self._rank, pending)
        ctx.unwaited.pop(id(self), None)
        mode = ctx.ops_mode
        if mode is not None and mode.streams is not None:
            mode.streams.wait_stream(ctx.stream_id, self._stream)
        with ctx.world.lock:  # the current stream waits for the streams the work ran on
            clocks = ctx.world.clocks
            for op in pending:
                clocks.stream_waits(ctx.rank, ctx.stream_id, clocks.vc[op.thread])
        if self._host_waits:  # NCCL's barrier blocks the host on the current stream (WorkNCCL::synchronize)
            from pkbsim.world.ops_mode import host_wait
            host_wait(ctx, ctx.stream_id)
            host_sync.wait_streams(ctx, [ctx.stream_id])
        return True

    def is_completed(self) -> bool:
        return all(op.done for op in self._pending())

    def is_success(self) -> bool:
        return self.is_completed()

    def exception(self):
        return None

    def synchronize(self) -> None:
        self.wait()

    def result(self):
        self.wait()
        return self._result

    def get_future(self) -> torch.futures.Future:
        self.wait()
        fut = torch.futures.Future()
        fut.set_result(self._result)
        return fut


def _fmt(shapes, dtypes) -> str:
    if not shapes:
        return ""
    if len(shapes) == 1:
        return f"{tuple(shapes[0])}, {dtypes[0]}"
    return f"{len(shapes)} tensors {tuple(shapes[0])}.., {dtypes[0]}"


def _moving(execute: Callable[[list], None], tensors) -> Callable[[list], None]:
    """Executors move real data with tracing modes off; shape runs (fake/meta tensors) move nothing."""
    if any(isinstance(t, torch.Tensor) and is_fake(t) for t in tensors):
        return lambda args: None

    def run(args):
        with behind_the_program():
            execute(args)
    return run


def _chunks(t: torch.Tensor, n: int) -> list[torch.Tensor]:
    if t.shape[0] % n:
        raise CollectiveMismatch(f"tensor of shape {tuple(t.shape)} does not split into {n} equal parts")
    return list(t.reshape(n, -1).unbind(0))


class SimProcessGroup(dist.ProcessGroup):
    def __init__(self, comm: Comm, group_rank: int, group_size: int):
        super().__init__(group_rank, group_size)
        self._comm, self._group_rank, self._group_size = comm, group_rank, group_size
        self._group_name = comm.name

    # ---- identity ------------------------------------------------------------------------------
    def getBackendName(self) -> str:
        return BACKEND_NAME

    def setGroupName(self, name: str) -> None:
        self._group_name = name

    def getGroupName(self) -> str:
        return self._group_name

    @property
    def group_name(self) -> str:
        return self._group_name

    def size(self) -> int:
        return self._group_size

    def rank(self) -> int:
        return self._group_rank

    def __repr__(self) -> str:
        return f"SimProcessGroup({self._comm.name}, rank {self._group_rank}/{self._group_size})"

    # ---- plumbing --------------------------------------------------------------------------------
    def _coll(self, name: str, signature: tuple, args: Any, execute: Callable[[list], None],
              tensors: list, extra: str = "", result: Any = None) -> SimWork:
        ctx = require()
        site = user_site()
        if ctx.rank not in self._comm.devices and ctx.nccl:
            self._bind_device(ctx, site, name)
        shapes, dtypes, nbytes = describe(tensors)
        desc = f"{name}({_fmt(shapes, dtypes)}{', ' + extra if extra else ''})"

        def guarded(all_args):
            try:
                _moving(execute, tensors)(all_args)
            except (CollectiveMismatch, NotSimulated) as e:
                kind = "mismatch" if isinstance(e, CollectiveMismatch) else "error"
                ctx.world.fail(Finding(kind, f"{name} on {self._comm}: {e}", list(self._comm.ranks), [site]))

        mode = ctx.ops_mode
        if mode is not None and mode.streams is not None:
            mode.check_stream_order(tensors, flat_tensors(result), name)
        op = ctx.engine.post_collective(self._comm, ctx.rank, name, signature, args, guarded, desc, site,
                                        batch=ctx.batch)
        ctx.trace.record("collective", name, site, stream=ctx.stream_id, group=self._comm.name, seq=op.seq,
                         group_ranks=self._comm.ranks, shapes=shapes, dtypes=dtypes, bytes=nbytes,
                         **({"detail": extra} if extra else {}))
        return SimWork(ctx, [op], site, result, ctx.stream_id)

    def _bind_device(self, ctx, site: str, op: str) -> None:
        """NCCL creates a communicator on each member's device at first use; two members on one GPU fail."""
        from pkbsim.standins.cuda_shim import bound_device

        if op == "barrier" and not ctx.device_set and ctx.explicit_device is None:
            msg = (f"rank {ctx.rank} calls barrier() at {site} before its GPU is known (no torch.cuda.set_device, "
                   f"no device_id): PyTorch guesses GPU rank % device_count for the barrier's communicator, "
                   f"which can hang; call torch.cuda.set_device(LOCAL_RANK) first")
            ctx.world.fail(Finding("protocol", msg, [ctx.rank], [site]), unless_failed=True)
            raise SimAbort(msg)
        dev = bound_device(ctx)
        node = ctx.rank // ctx.world.nproc_per_node
        with ctx.world.lock:
            self._comm.devices[ctx.rank] = (node, dev, site)
            clash = [r for r, (n, d, _) in self._comm.devices.items() if r != ctx.rank and (n, d) == (node, dev)]
        if clash:
            other = clash[0]
            msg = (f"ranks {other} and {ctx.rank} both use cuda:{dev} of node {node} in {self._comm} (first "
                   f"collectives at {self._comm.devices[other][2]} and {site}); NCCL fails with 'Duplicate GPU "
                   f"detected' or hangs: call torch.cuda.set_device(LOCAL_RANK) before the first collective")
            ctx.world.fail(Finding("protocol", msg, [other, ctx.rank], [self._comm.devices[other][2], site]),
                           unless_failed=True)
            raise SimAbort(msg)

    @staticmethod
    def _redop(opts, premul: bool = False) -> Any:
        """The reduction; ReduceOp.PREMUL_SUM (FSDP2's gradient reduce-scatter) is a SUM of inputs that
        _premul scaled, in the collectives that call it (`premul`)."""
        op = opts.reduceOp.op
        if op == dist.ReduceOp.RedOpType.PREMUL_SUM:
            if not premul:
                raise NotSimulated("ReduceOp.PREMUL_SUM is not simulated in this collective")
            return dist.ReduceOp.RedOpType.SUM
        return op

    @staticmethod
    def _premul(opts, t, in_place: bool = False):
        """This rank's input times its PREMUL_SUM factor (a number or a one-element tensor); `t` otherwise. In
        place only where the collective overwrites its input anyway (all_reduce)."""
        if opts is None or opts.reduceOp.op != dist.ReduceOp.RedOpType.PREMUL_SUM:
            return t
        factor = opts.reduceOp.factor
        if isinstance(factor, torch.Tensor):
            factor = factor.to(t.dtype).reshape(())
        return t.mul_(factor) if in_place else t * factor

    # ---- collectives -------------------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        op = self._redop(opts, premul=True)
        t = self._premul(opts, tensors[0], in_place=True)

        def execute(ins):
            out = reduce_tensors(ins, op)
            for x in ins:
                x.copy_(out.reshape(x.shape))
        return self._coll("all_reduce", (t.numel(), t.dtype, op), t, execute, [t], op_name(op), tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        op = self._redop(opts)

        def execute(ins):
            for k in range(len(tensors)):
                out = reduce_tensors([x[k] for x in ins], op)
                for x in ins:
                    x[k].copy_(out.reshape(x[k].shape))
        sig = (tuple(t.numel() for t in tensors), tuple(t.dtype for t in tensors), op)
        return self._coll("all_reduce_coalesced", sig, list(tensors), execute, tensors, op_name(op), tensors)

    def broadcast(self, tensors, opts=None):
        root, t = opts.rootRank, tensors[0]

        def execute(ins):
            for x in ins:
                if x is not ins[root]:
                    x.copy_(ins[root].reshape(x.shape))
        return self._coll("broadcast", (t.numel(), t.dtype, root), t, execute, [t], f"src={root}", tensors)

    def reduce(self, tensors, opts=None):
        root, op, t = opts.rootRank, self._redop(opts), tensors[0]

        def execute(ins):
            ins[root].copy_(reduce_tensors(ins, op).reshape(ins[root].shape))
        return self._coll("reduce", (t.numel(), t.dtype, root, op), t, execute, [t], f"{op_name(op)}, dst={root}",
                          tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        """The list form takes a different size from each rank (NCCL broadcasts each rank's part when the
        output tensors differ in size): what must agree is that every rank expects rank j's part at the size
        rank j sends."""
        outs, inp = output_tensors[0], input_tensors[0]

        def execute(args):
            for i, (out_list, _) in enumerate(args):
                if len(out_list) != len(args):
                    raise CollectiveMismatch(f"rank {self._comm.ranks[i]}'s output list has {len(out_list)} "
                                             f"entries for {len(args)} ranks")
                for j, (_, x) in enumerate(args):
                    if out_list[j].numel() != x.numel():
                        raise CollectiveMismatch(f"rank {self._comm.ranks[j]} sends {x.numel()} elements, rank "
                                                 f"{self._comm.ranks[i]} expects {out_list[j].numel()}")
            for out_list, _ in args:
                for j, (_, x) in enumerate(args):
                    out_list[j].copy_(x.reshape(out_list[j].shape))
        return self._coll("all_gather", (inp.dtype,), (outs, inp), execute, [inp], result=output_tensors)

    def _allgather_base(self, output, input, opts=None):
        def execute(args):
            for out, _ in args:
                for j, part in enumerate(_chunks(out, len(args))):
                    part.copy_(args[j][1].reshape(-1))
        return self._coll("all_gather_into_tensor", (input.numel(), input.dtype), (output, input), execute, [input],
                          result=output)

    all_gather_single = _allgather_base

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        def execute(args):
            for k in range(len(inputs)):
                for out, _ in args:
                    for j, part in enumerate(_chunks(out[k], len(args))):
                        part.copy_(args[j][1][k].reshape(-1))
        sig = (tuple(t.numel() for t in inputs), tuple(t.dtype for t in inputs))
        return self._coll("all_gather_into_tensor_coalesced", sig, (list(outputs), list(inputs)), execute, inputs,
                          result=outputs)

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op, out = self._redop(opts, premul=True), output_tensors[0]
        ins = [self._premul(opts, x) for x in input_tensors[0]]

        def execute(args):
            for i, (o, _) in enumerate(args):
                o.copy_(reduce_tensors([a[1][i] for a in args], op).reshape(o.shape))
        return self._coll("reduce_scatter", (out.numel(), out.dtype, op), (out, ins), execute, [out], op_name(op),
                          output_tensors)

    def _reduce_scatter_base(self, output, input, opts=None):
        op = self._redop(opts, premul=True)

        def execute(args):
            n = len(args)
            parts = [_chunks(a[1], n) for a in args]
            for i, (o, _) in enumerate(args):
                o.copy_(reduce_tensors([p[i] for p in parts], op).reshape(o.shape))
        return self._coll("reduce_scatter_tensor", (input.numel(), input.dtype, op), (output, self._premul(opts, input)),
                          execute,
                          [input], op_name(op), output)

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        op = self._redop(opts)

        def execute(args):
            n = len(args)
            for k in range(len(inputs)):
                parts = [_chunks(a[1][k], n) for a in args]
                for i, (o, _) in enumerate(args):
                    o[k].copy_(reduce_tensors([p[i] for p in parts], op).reshape(o[k].shape))
        sig = (tuple(t.numel() for t in inputs), tuple(t.dtype for t in inputs), op)
        return self._coll("reduce_scatter_tensor_coalesced", sig, (list(outputs), list(inputs)), execute, inputs,
                          op_name(op), outputs)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        n = self._group_size

        def execute(args):
            sends, recvs = [], []
            for out, inp, osz, isz in args:
                isz = list(isz) or [inp.shape[0] // n] * n
                osz = list(osz) or [out.shape[0] // n] * n
                if sum(isz) != inp.shape[0] or sum(osz) != out.shape[0]:
                    raise CollectiveMismatch(f"split sizes {isz}/{osz} do not add up to the tensor lengths")
                sends.append(list(inp.split(isz)))
                recvs.append(list(out.split(osz)))
            for i in range(n):
                for j in range(n):
                    if sends[i][j].numel() != recvs[j][i].numel():
                        raise CollectiveMismatch(
                            f"rank {self._comm.ranks[i]} sends {sends[i][j].numel()} elements to rank "
                            f"{self._comm.ranks[j]}, which expects {recvs[j][i].numel()}")
                    recvs[j][i].copy_(sends[i][j].reshape(recvs[j][i].shape))
        extra = "uneven" if (output_split_sizes or input_split_sizes) else ""
        return self._coll("all_to_all_single", (input.dtype,), (output, input, output_split_sizes, input_split_sizes),
                          execute, [input], extra, output)

    all_to_all_single = alltoall_base

    def alltoall(self, output_tensors, input_tensors, opts=None):
        def execute(args):
            for j, (outs, _) in enumerate(args):
                for i, (_, ins) in enumerate(args):
                    if outs[i].numel() != ins[j].numel():
                        raise CollectiveMismatch(f"rank {self._comm.ranks[i]} sends {ins[j].numel()} elements to "
                                                 f"rank {self._comm.ranks[j]}, which expects {outs[i].numel()}")
                    outs[i].copy_(ins[j].reshape(outs[i].shape))
        dt = input_tensors[0].dtype if input_tensors else None
        return self._coll("all_to_all", (dt,), (output_tensors, input_tensors), execute, input_tensors,
                          result=output_tensors)

    def gather(self, output_tensors, input_tensors, opts=None):
        root, inp = opts.rootRank, input_tensors[0]

        def execute(args):
            outs = args[root][0]
            if len(outs) != len(args):
                raise CollectiveMismatch(f"the root's gather list has {len(outs)} entries for {len(args)} ranks")
            for j, (_, x) in enumerate(args):
                outs[j].copy_(x.reshape(outs[j].shape))
        outs = output_tensors[0] if output_tensors else []
        return self._coll("gather", (inp.numel(), inp.dtype, root), (outs, inp), execute, [inp], f"dst={root}",
                          output_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        root, out = opts.rootRank, output_tensors[0]

        def execute(args):
            ins = args[root][1]
            if len(ins) != len(args):
                raise CollectiveMismatch(f"the root's scatter list has {len(ins)} entries for {len(args)} ranks")
            for j, (o, _) in enumerate(args):
                o.copy_(ins[j].reshape(o.shape))
        ins = input_tensors[0] if input_tensors else []
        return self._coll("scatter", (out.numel(), out.dtype, root), (out, ins), execute, [out], f"src={root}",
                          output_tensors)

    def barrier(self, opts=None):
        work = self._coll("barrier", (), None, lambda args: None, [])
        work._host_waits = True
        return work

    # ---- point-to-point ----------------------------------------------------------------------------
    def _p2p(self, kind: str, tensor: torch.Tensor, group_peer: int) -> SimWork:
        ctx = require()
        site = user_site()
        peer = self._comm.ranks[group_peer]
        op = ctx.engine.post_p2p(self._comm, ctx.rank, kind, peer, tensor, site, batch=ctx.batch)
        shapes, dtypes, nbytes = describe([tensor])
        ctx.trace.record("p2p", kind, site, stream=ctx.stream_id, group=self._comm.name, peer=peer,
                         shapes=shapes, dtypes=dtypes, bytes=nbytes, batched=ctx.batch is not None)
        return SimWork(ctx, [op], site, [tensor], ctx.stream_id)

    def send(self, tensors, dstRank, tag=0):
        return self._p2p("send", tensors[0], dstRank)

    def recv(self, tensors, srcRank, tag=0):
        return self._p2p("recv", tensors[0], srcRank)

    def recv_anysource(self, tensors, tag=0):
        raise NotSimulated("recv from any source (dist.recv without src) is not simulated; pass src")


def create_backend(dist_opts, backend_opts) -> SimProcessGroup:
    """The creator registered with `dist.Backend.register_backend(..., extended_api=True)`."""
    ctx = current()
    if ctx is None:
        raise RuntimeError("the 'sim' backend only works inside a simulated world (pkb check)")
    ranks = list(dist_opts.global_ranks_in_group) or list(range(dist_opts.group_size))
    comm = ctx.engine.comm(str(dist_opts.group_id), ranks)
    if ctx.world_comm is None:
        ctx.world_comm = comm  # the default group is created first
    return SimProcessGroup(comm, dist_opts.group_rank, dist_opts.group_size)


def register() -> None:
    if BACKEND_NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND_NAME, create_backend, extended_api=True, devices=["cpu", "cuda"])
