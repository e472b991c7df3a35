"""Run a task's reference (or any function with its signature) on the simulated world.

Each rank initialises a process group the way torchrun programs do, builds its inputs with the
task's make_inputs, keeps a copy of them, calls the function and keeps its outputs.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

import pkbsim.plugins  # noqa: F401 - registers the world's plug-ins (symmetric memory, Triton, inline CUDA)
from pkbsim.world import host_sync
from pkbsim.world.comms import behind_the_program, is_fake
from pkbsim.world.defaults import RUN_TIMEOUT_S
from pkbsim.world.eager_mode import EagerDispatchMode
from pkbsim.world.launcher import RunOptions, RunResult, run_ranks
from pkbsim.world.trace import records_doc
from tasks.api import TaskContext, aliased_outputs, as_outputs, compare, flat_tensors
from tasks.registry import TaskSpec


@dataclass
class Call:
    """One call on every rank within a run: the reference (no load/fn) or a candidate, on one trial's inputs."""
    trial: int = 0
    load: Callable[[], Callable] | None = None  # imports the candidate on the calling rank (once per rank)
    fn: Callable | None = None
    poison: bool = False  # NaN-fill the call's uninitialised allocations (see PoisonEmpty)
    sync: bool = True     # a harness barrier before the call; False: straight after the previous call, as in a
                          # GPU timing loop, where a missing exit barrier lets this call overwrite what a peer reads
    size: dict | None = None  # this call's base shape instead of the run's (the screen's sizes stage)


@dataclass
class CallResult:
    inputs: list   # per rank, copied before the call
    outputs: list  # per rank
    records: list  # per rank: the trace records of this call (with record_compute)
    aliased: list  # per rank: indices of the outputs that share memory with the call's inputs
    digests: list  # per rank: (input_digest before the call, after it); None: inputs not digested

    @property
    def mutated(self) -> list:
        """Per rank: whether the call changed its inputs (None: inputs too large to check)."""
        return [None if d is None else d[0] != d[1] for d in self.digests]

    @property
    def complete(self) -> bool:
        return all(o is not None for o in self.outputs)

    def trace(self, task: TaskSpec, preset: str) -> dict:
        """This call's records (taken with record_compute) as one `pkb.trace/1` document."""
        return records_doc(len(self.records), self.records, {"task": task.slug, "preset": preset})


@dataclass
class Raised:
    """An exception that ended a rank's call (or its input building), in the order they happened."""
    call: int
    rank: int
    error: BaseException


@dataclass
class TaskRun:
    result: RunResult
    calls: list[CallResult]
    raised: list[Raised]

    @property
    def inputs(self) -> list:
        return self.calls[0].inputs

    @property
    def outputs(self) -> list:
        return self.calls[0].outputs

    @property
    def ok(self) -> bool:
        return self.result.verdict == "ok" and all(c.complete for c in self.calls)


def _copy(x):
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_copy(y) for y in x)
    return x


_EMPTY = {torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default,
          torch.ops.aten.empty_like.default, torch.ops.aten.new_empty.default,
          torch.ops.aten.new_empty_strided.default}


class PoisonEmpty(EagerDispatchMode):
    """Fills every uninitialised allocation with NaN (or -1 for integers), so that a run cannot pass by
    reading memory a previous run left behind. The fill is the simulator's, not the program's: traces and
    the rank's ops mode do not see it."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _EMPTY and isinstance(out, torch.Tensor) and out.numel():
            with behind_the_program():
                out.fill_(float("nan") if out.is_floating_point() else -1)
        return out


def run_task(task: TaskSpec, fn: Callable | None, world_size: int, *, seed: int = 0, trial: int = 0,
             preset: str = "screen", no_comm: bool = False, timeout: float = RUN_TIMEOUT_S, output=None,
             load: Callable[[], Callable] | None = None, record_compute: bool = False,
             poison: bool = False) -> TaskRun:
    """Call fn (default: the reference) once on every rank with that rank's inputs."""
    return run_calls(task, [Call(trial, load, fn, poison)], world_size, seed=seed, preset=preset, no_comm=no_comm,
                     timeout=timeout, output=output, record_compute=record_compute)


def run_calls(task: TaskSpec, calls: list[Call], world_size: int, *, seed: int = 0, preset: str = "screen",
              no_comm: bool = False, timeout: float = RUN_TIMEOUT_S, output=None, record_compute: bool = False,
              keep_inputs: bool = True, shape_run: bool | None = None, size: dict | None = None) -> TaskRun:
    """Several calls in one run of the simulated world (a world's start-up costs more than a screen-size
    call), separated by barriers so that a call starts only once every rank has finished the previous
    one, except before a call with `sync=False`. A candidate file is imported once per rank (`Call.load`), so no module state is shared between
    ranks. Each call's trace records are kept apart, and the trace covers the calls only, as timing does.
    With `keep_inputs=False` no copy of the inputs is kept (CallResult.inputs stays None): a caller that
    compares outputs only saves a copy of every call's inputs, all ranks', for the whole run. Each call's inputs
    are digested before and after it (CallResult.digests): a screen's candidate process hands back the
    digests after, and the screen compares them with those of the inputs it made. A full-size run
    is a shape run (no data) unless `shape_run` says otherwise. `size` replaces the preset's size (the screen's
    sizes stage runs a task between its presets)."""
    results = [CallResult(*([None] * world_size for _ in range(5))) for _ in calls]
    raised: list[Raised] = []

    def body(ctx) -> None:
        recording, ctx.trace.enabled = ctx.trace.enabled, False
        dist.init_process_group("nccl")
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        # the harness's barriers use a communicator of their own, so they never match a call's collectives
        between = dist.new_group(list(range(world_size))) if len(calls) > 1 else None
        loaded: dict = {}
        for i, c in enumerate(calls):
            if i and c.sync:
                host_sync.wait_streams(ctx)  # the scorer synchronizes the device between calls (every stream)
                dist.barrier(group=between)
            ctx.call = i + 1
            try:
                if c.load is not None and c.load not in loaded:
                    loaded[c.load] = c.load()
                fn = loaded[c.load] if c.load is not None else c.fn or task.reference
                tctx = TaskContext(ctx.rank, world_size, seed, c.trial, preset, dict(c.size or size or task.sizes[preset]),
                                   torch.device("cuda", local))
                args = task.make_inputs(tctx)
                if keep_inputs:
                    results[i].inputs[ctx.rank] = _copy(args)
                ctx.trace.enabled = recording
                poison = no_comm or c.poison
                before = input_digest(args)
                with PoisonEmpty() if poison else contextlib.nullcontext():
                    out = fn(*args)
            except Exception as e:
                raised.append(Raised(i, ctx.rank, e))
                raise
            ctx.trace.enabled = False
            results[i].outputs[ctx.rank] = _copy(as_outputs(out))
            results[i].aliased[ctx.rank] = aliased_outputs(as_outputs(out), args)
            results[i].digests[ctx.rank] = None if before is None else (before, input_digest(args))
            results[i].records[ctx.rank], ctx.trace.records = ctx.trace.records, []
        dist.destroy_process_group()

    opts = RunOptions(nproc=world_size, timeout=timeout, output=output or io.StringIO(), no_comm=no_comm,
                      shape_run=preset == "full" if shape_run is None else shape_run, record_compute=record_compute)
    return TaskRun(run_ranks(body, opts), results, raised)


DIGEST_LIMIT = 64 << 20  # bytes of inputs per rank and call beyond which a change is not looked for


def input_digest(args) -> str | None:
    """A digest of the call's input tensors (None when they are larger than DIGEST_LIMIT or not real)."""
    tensors = [t for t in flat_tensors(args) if t.layout == torch.strided]
    if any(is_fake(t) for t in tensors) or sum(t.numel() * t.element_size() for t in tensors) > DIGEST_LIMIT:
        return None
    h = hashlib.sha1()
    try:
        with behind_the_program():
            for t in tensors:  # shapes too: inputs of two sizes may hold the same bytes (the sizes stage tells them apart)
                h.update(f"{tuple(t.shape)}{t.dtype}".encode())
                h.update(t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    except (RuntimeError, TypeError, NotImplementedError):  # fake or otherwise unreadable tensors
        return None
    return h.hexdigest()


def mismatches(task: TaskSpec, outs: list, refs: list) -> list[str]:
    """One message per rank whose outputs fail the task's comparison (empty when all match)."""
    msgs = []
    for rank, (o, r) in enumerate(zip(outs, refs)):
        if o is None or len(o) != len(r):
            msgs.append(f"rank {rank}: {'no outputs' if o is None else f'{len(o)} outputs, expected {len(r)}'}")
            continue
        for spec, oo, rr in zip(task.outputs, o, r):
            m = compare(oo, rr, spec)
            if m:
                msgs.append(f"rank {rank}: {m}")
                break
    return msgs
