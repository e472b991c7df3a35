"""ParallelKernelBench problems as tasks, loaded from a user's checkout at run time (never copied here).

A checkout has `reference/<id>_<name>.py` (each defines `solution(...)`, the NCCL reference) and
`utils/input_output_tensors.py: create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial,
device)`. Each problem becomes the task `pkb<id>_<name>`, set up as PKB's harness runs it: inputs from that
builder in PKB's dtype (bfloat16 unless asked otherwise) with base_shape (m, n) (screen 64x64, full
1024x1024, PKB's default; a block size among the inputs grows the screen base), each rank with its own
instance of the reference module (as each torchrun process has), and outputs compared as PKB compares them
(pkb_compare.py). Inputs and the reference run under memory and FLOP budgets (pkb_limits.py): going over
raises PkbLimitExceeded, which the screen reports as inconclusive, naming the limit.
"""
from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import re
import sys
import threading
from dataclasses import dataclass

import torch

from pkbsim.screen.pkb_compare import ATOL, RTOL, pkb_mismatch
from pkbsim.screen.pkb_limits import FlopBudget, InputBudget, PkbLimitExceeded  # noqa: F401 - named for the screen
from pkbsim.world.context import current
from pkbsim.world.device_identity import tag, tagged
from tasks.api import Output, WorldSizes
from tasks.registry import TaskSpec, register_external

SIZES = {"screen": {"m": 64, "n": 64}, "full": {"m": 1024, "n": 1024}}
DTYPES = ("bfloat16", "float16", "float32", "float64")  # PKB's --dtype choices; bfloat16 is its default
MAX_OUTPUTS = 32  # PKB does not declare outputs; compare up to this many top-level ones, each recursively
ID_BASE = 100000


class PkbCheckoutError(Exception):
    pass


def _module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def problem_key(stem: str) -> tuple[int, str] | None:
    """(id, name) of a file stem `<id>_<name>[_<backend>]`, or None."""
    m = re.fullmatch(r"(\d+)_(\w+)", stem)
    return (int(m.group(1)), m.group(2)) if m else None


def problems(root: str) -> dict[int, str]:
    """PKB problem id -> reference file, from the checkout's reference/ folder."""
    ref_dir = os.path.join(root, "reference")
    if not os.path.isdir(ref_dir) or not os.path.isfile(os.path.join(root, "utils", "input_output_tensors.py")):
        raise PkbCheckoutError(f"{root} is not a ParallelKernelBench checkout (it needs reference/ and "
                               f"utils/input_output_tensors.py); pass the repository's root to --pkb-root")
    found = {}
    for f in sorted(os.listdir(ref_dir)):
        key = problem_key(f[:-3]) if f.endswith(".py") else None
        if key:
            found.setdefault(key[0], os.path.join(ref_dir, f))
    return found


def torch_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise PkbCheckoutError(f"--pkb-dtype {name!r} is not one of PKB's dtypes ({', '.join(DTYPES)})")
    return getattr(torch, name)


# one rank imports at a time: CPython 3.11's parser is not thread-safe (a module-level @torch.jit.script, as in
# problem 55, parses source on import: "SystemError: AST constructor recursion depth mismatch")
_importing = threading.Lock()


class RankReference:
    """A problem's reference `solution`, its module imported once per rank per run of the world: a
    reference that keeps state at module level (problem 51 caches its new_group results) must not share it
    between rank threads, as each process of a torchrun job has its own. Runs under the FLOP budget."""

    def __init__(self, path: str, slug: str):
        self.path, self.slug = path, slug
        self.module = _module(path, f"pkb_reference_{slug}")  # outside a world, and for the signature
        fn = getattr(self.module, "solution", None)
        if not callable(fn):
            raise PkbCheckoutError(f"{path} defines no solution(...); is this a ParallelKernelBench reference?")
        self.__signature__ = inspect.signature(fn)

    def __call__(self, *args):
        ctx = current()
        if ctx is None:
            return self.module.solution(*args)
        key = ("pkb_reference", self.path)
        if key not in ctx.extra:
            with _importing:
                ctx.extra[key] = _module(self.path, f"pkb_reference_{self.slug}_rank{ctx.rank}")
        with contextlib.nullcontext() if _shapes_only() else FlopBudget(self.slug, ctx.world.size):
            return ctx.extra[key].solution(*args)


@dataclass
class InputBuilder:
    """A problem's inputs from the checkout's builder, at the preset's base shape in PKB's dtype.

    At screen size a power-of-two integer input larger than the base shape is taken as a block size the
    shape must hold (problem 19 quantises 128-wide blocks): the base grows to it, up to the full size.

    A rank builds each trial's inputs once per run of the world: PKB's builder seeds the rank's generator
    from (problem, rank, trial) alone, so a later call on the same trial (the screen calls the candidate on
    trials 0, 1, 2, 0 after the reference's 0, 1, 2) gets a fresh copy of the same values, with the
    generator where the build left it, instead of building them again (problem 60 draws and FFTs a
    2x10x720x1440 field on every rank, problem 62 fills an index tensor one element at a time). Inputs
    a copy could not reproduce exactly (modules, autograd history, views into a larger or shared storage,
    other objects than tensors, numbers, strings, dtypes, devices, sizes and process groups) are built
    again every time."""
    builder: object
    pid: int
    slug: str
    dtype: torch.dtype

    def __call__(self, ctx) -> tuple:
        rank = current()
        if rank is None or _shapes_only():
            return self.fresh(ctx)
        kept = rank.extra.setdefault("pkb_inputs", {})
        key = (self.pid, ctx.preset, ctx.trial, ctx.size["m"], ctx.size["n"], ctx.world_size)
        if key in kept:
            args, state = kept[key]
            rank.extra["generator"].set_state(state)
            return _copy_inputs(args)
        args = self.fresh(ctx)
        if _reusable(args, set()):
            kept[key] = (_copy_inputs(args), rank.extra["generator"].get_state())
        return args

    def fresh(self, ctx) -> tuple:
        m, n = ctx.size["m"], ctx.size["n"]
        args = self.build(ctx, m, n)
        block = max([v for v in args if _is_block(v)], default=0) if ctx.preset == "screen" else 0
        if block > min(m, n):
            side = min(block, *SIZES["full"].values())
            args = self.build(ctx, max(m, side), max(n, side))
        return args

    def build(self, ctx, m: int, n: int) -> tuple:
        if _shapes_only():
            return self.call_builder(ctx, m, n)
        with InputBudget(self.slug, ctx.world_size) as budget:
            args = self.call_builder(ctx, m, n)
        budget.check(args)
        return args

    def call_builder(self, ctx, m: int, n: int) -> tuple:
        out = self.builder.create_input_tensor(ctx.rank, ctx.world_size, self.pid, (m, n), self.dtype, ctx.trial,
                                               ctx.device)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


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


def _is_block(v) -> bool:
    return type(v) is int and v > 0 and v & (v - 1) == 0


def _shapes_only() -> bool:
    """Whether this is a full-size shape run (fake tensors): budgets are for real allocations and compute."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    return any(isinstance(m, FakeTensorMode) for m in _get_current_dispatch_mode_stack())


_loaded: dict[tuple[str, str], dict[int, TaskSpec]] = {}


def register_pkb_tasks(root: str, known: dict | None = None, dtype: str = "bfloat16") -> dict[int, str]:
    """Register every problem of the checkout as a task (once per process); returns PKB id -> task slug."""
    root = os.path.abspath(root)
    specs = _loaded.get((root, dtype))
    if specs is None:
        specs = _loaded[(root, dtype)] = _load(root, torch_dtype(dtype))
    for spec in specs.values():
        register_external(spec)
        if known is not None:
            known[spec.slug] = spec
    return {pid: spec.slug for pid, spec in specs.items()}


def _load(root: str, dtype: torch.dtype) -> dict[int, TaskSpec]:
    refs = problems(root)
    if root not in sys.path:
        sys.path.insert(0, root)  # references and builders import `utils.*` from the checkout
    builder = _module(os.path.join(root, "utils", "input_output_tensors.py"), "pkb_checkout_inputs")
    outputs = tuple(Output(f"output_{i}", dtype, rtol=RTOL, atol=ATOL, check=pkb_mismatch) for i in range(MAX_OUTPUTS))
    specs = {}
    for pid, path in refs.items():
        stem = os.path.basename(path)[:-3]
        slug = "pkb" + stem
        specs[pid] = TaskSpec(slug, ID_BASE + pid, f"ParallelKernelBench problem {pid} ({stem})", "external",
                              f"ParallelKernelBench {path}", WorldSizes(min=2), SIZES, outputs,
                              InputBuilder(builder, pid, slug, dtype), RankReference(path, slug), None, builder)
    return specs
