"""Run a task's reference (or any function with its signature) on the simulated world.

Each rank initialises a process group the way torchrun programs do, builds its inputs with the
task's make_inputs, keeps a copy of them, calls the function and keeps its outputs.
"""
from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from pkbsim.world.launcher import RunOptions, RunResult, run_ranks
from tasks.api import TaskContext, as_outputs, compare
from tasks.registry import TaskSpec


@dataclass
class TaskRun:
    result: RunResult
    inputs: list[tuple | None]  # per rank, copied before the call
    outputs: list[tuple | None]  # per rank

    @property
    def ok(self) -> bool:
        return self.result.verdict == "ok" and all(o is not None for o in self.outputs)


def _copy(x):
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_copy(y) for y in x)
    return x


_EMPTY = {torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default,
          torch.ops.aten.empty_like.default, torch.ops.aten.new_empty.default,
          torch.ops.aten.new_empty_strided.default}


class PoisonEmpty(TorchDispatchMode):
    """Fills every uninitialised allocation with NaN (or -1 for integers), so that a run cannot pass by
    reading memory a previous run left behind."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _EMPTY and isinstance(out, torch.Tensor) and out.numel():
            out.fill_(float("nan") if out.is_floating_point() else -1)
        return out


def run_task(task: TaskSpec, fn: Callable | None, world_size: int, *, seed: int = 0, trial: int = 0,
             preset: str = "screen", no_comm: bool = False, timeout: float = 120.0, output=None,
             load: Callable[[], Callable] | None = None, record_compute: bool = False,
             poison: bool = False) -> TaskRun:
    """Call fn (default: the reference) on every rank with that rank's inputs. `load`, if given, is
    called on each rank inside the simulated world and returns that rank's fn: a candidate file is
    imported once per rank, so no module state is shared between ranks. `poison` NaN-fills the call's
    uninitialised allocations, so that memory a previous run freed (e.g. the reference's outputs)
    cannot pass for a result."""
    inputs: list = [None] * world_size
    outputs: list = [None] * world_size

    def body(ctx) -> None:
        call = load() if load else fn or task.reference
        dist.init_process_group("nccl")
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        tctx = TaskContext(ctx.rank, world_size, seed, trial, preset, dict(task.sizes[preset]),
                           torch.device("cuda", local))
        recording, ctx.trace.enabled = ctx.trace.enabled, False  # the trace covers the call only, as timing does
        args = task.make_inputs(tctx)
        inputs[ctx.rank] = _copy(args)
        ctx.trace.enabled = recording
        with PoisonEmpty() if no_comm or poison else contextlib.nullcontext():
            result = call(*args)
        ctx.trace.enabled = False
        outputs[ctx.rank] = _copy(as_outputs(result))
        dist.destroy_process_group()

    opts = RunOptions(nproc=world_size, timeout=timeout, output=output or io.StringIO(), no_comm=no_comm,
                      shape_run=preset == "full", record_compute=record_compute)
    return TaskRun(run_ranks(body, opts), inputs, outputs)


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
