"""ParallelKernelBench problems as simulator tasks: the checkout's tasks (tasks/parallelkernelbench) with
what the simulated world needs on top.

Each rank has its own instance of the reference module (as each torchrun process has), a rank builds each
trial's inputs once per run of the world, and inputs and the reference run under memory and FLOP budgets
(parallelkernelbench_budgets.py): going over raises PkbLimitExceeded, which the screen reports as inconclusive,
naming the limit.
"""
from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field

import torch

from pkbsim.screen.parallelkernelbench_budgets import (  # noqa: F401 - PkbLimitExceeded named for the screen
    FlopBudget,
    InputBudget,
    PkbLimitExceeded,
)
from pkbsim.world.context import current
from pkbsim.standins.device_identity import tag, tagged
from pkbsim.world.plugins import RankState
from tasks.parallelkernelbench.checkout import Inputs, Reference, load_module, load_specs, register
from tasks.parallelkernelbench.naming import DEFAULT_DTYPE, Checkout
from tasks.registry import TaskSpec

# one rank imports at a time: CPython 3.11's parser is not thread-safe (a module-level @torch.jit.script, as in
# problem 55, parses source on import: "SystemError: AST constructor recursion depth mismatch")
_importing = threading.Lock()


@dataclass
class _OnRank:
    """What one rank keeps of the problems for one run of the world."""
    references: dict[str, object] = field(default_factory=dict)  # reference file -> its module on this rank
    inputs: dict[tuple, tuple] = field(default_factory=dict)  # (problem, preset, trial, m, n, world) -> kept


_ON_RANK = RankState(_OnRank)


class RankReference(Reference):
    """A problem's reference `solution`, its module imported once per rank per run of the world: a
    reference that keeps state at module level (problem 51 caches its new_group results) must not share it
    between rank threads, as each process of a torchrun job has its own. Runs under the FLOP budget."""

    def __call__(self, *args):
        ctx = current()
        if ctx is None:
            return self.module.solution(*args)
        modules = _ON_RANK.of(ctx).references
        if self.path not in modules:
            with _importing:
                modules[self.path] = load_module(self.path, f"pkb_reference_{self.slug}_rank{ctx.rank}")
        with contextlib.nullcontext() if _shapes_only() else FlopBudget(self.slug, ctx.world.size):
            return modules[self.path].solution(*args)


class InputBuilder(Inputs):
    """The checkout's inputs, under the input budget, built once per trial and rank.

    A rank builds each trial's inputs once per run of the world: ParallelKernelBench's builder seeds the rank's
    generator from (problem, rank, trial) alone, so a later call on the same trial (the screen calls the candidate on
    trials 0, 1, 2, 0 after the reference's 0, 1, 2) gets a fresh copy of the same values, with the
    generator where the build left it, instead of building them again (problem 60 draws and FFTs a
    2x10x720x1440 field on every rank, problem 62 fills an index tensor one element at a time). Inputs
    a copy could not reproduce exactly (modules, autograd history, views into a larger or shared storage,
    other objects than tensors, numbers, strings, dtypes, devices, sizes and process groups) are built
    again every time."""

    def __call__(self, ctx) -> tuple:
        rank = current()
        if rank is None or _shapes_only():
            return self.fresh(ctx)
        kept = _ON_RANK.of(rank).inputs
        key = (self.pid, ctx.preset, ctx.trial, ctx.size["m"], ctx.size["n"], ctx.world_size)
        if key in kept:
            args, state = kept[key]
            rank.generator.set_state(state)
            return _copy_inputs(args)
        args = self.fresh(ctx)
        if _reusable(args, set()):
            kept[key] = (_copy_inputs(args), rank.generator.get_state())
        return args

    def pkb_trial(self, ctx) -> int:
        """ParallelKernelBench's own trial numbers, whatever the batch's seed: the screen runs a problem as
        ParallelKernelBench's harness does."""
        return ctx.trial

    def build(self, ctx, m: int, n: int) -> tuple:
        if _shapes_only():
            return self.call_builder(ctx, m, n)
        with InputBudget(self.slug, ctx.world_size) as budget:
            args = self.call_builder(ctx, m, n)
        budget.check(args)
        return args


_PLAIN = (int, float, complex, str, type(None), torch.dtype, torch.device, torch.Size, torch.distributed.ProcessGroup)


def _reusable(x, storages: set) -> bool:
    """Whether _copy_inputs reproduces x exactly: tensors that own their whole storage (no view, no
    expand, no storage shared with another input) or are sparse, without autograd history, in plain
    lists, tuples and dicts, beside values that cannot change."""
    if type(x) is torch.Tensor:
        if x.grad_fn is not None or x.is_conj() or x.is_neg():
            return False
        if x.layout == torch.sparse_coo:
            return True
        if x.layout != torch.strided:
            return False
        st = x.untyped_storage()
        if x.storage_offset() or st.nbytes() != x.numel() * x.element_size() or st.data_ptr() in storages:
            return False
        if st.data_ptr():
            storages.add(st.data_ptr())
        return True
    if type(x) in (list, tuple):
        return all(_reusable(y, storages) for y in x)
    if type(x) is dict:
        return all(type(k) in (int, str) and _reusable(v, storages) for k, v in x.items())
    return isinstance(x, _PLAIN)


def _copy_inputs(x):
    """A fresh copy of reusable inputs: new tensors (same strides, dtype, requires_grad and the device the
    program sees), new containers, the same process groups."""
    if isinstance(x, torch.Tensor):
        c = x.detach().clone().requires_grad_(x.requires_grad)
        dev = tagged(x)
        if dev is not None:
            tag(c, dev)
        return c
    if type(x) in (list, tuple):
        return type(x)(_copy_inputs(y) for y in x)
    if type(x) is dict:
        return {k: _copy_inputs(v) for k, v in x.items()}
    return x


def _shapes_only() -> bool:
    """Whether this is a full-size shape run (fake tensors): budgets are for real allocations and compute."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    return any(isinstance(m, FakeTensorMode) for m in _get_current_dispatch_mode_stack())


def budgeted(task: TaskSpec) -> bool:
    """Whether the task's inputs and reference run under the budgets (a problem registered here): a run of it
    with data at full size cannot take more memory or time than the screen has, so the cost stage may make one
    where a shape run cannot go (pkbsim.screen.cost.shape_trace)."""
    return isinstance(task.reference, RankReference) and isinstance(task.make_inputs, InputBuilder)


_loaded: dict[Checkout, dict[int, TaskSpec]] = {}


def register_parallelkernelbench_tasks(root: str, known: dict | None = None,
                                       dtype: str = DEFAULT_DTYPE) -> dict[int, str]:
    """Register every problem of the checkout as a simulator task (once per process); returns
    ParallelKernelBench id -> slug."""
    checkout = Checkout(os.path.abspath(root), dtype)
    if checkout not in _loaded:
        _loaded[checkout] = load_specs(checkout, RankReference, InputBuilder)
    return register(_loaded[checkout], checkout, known)
