"""A ParallelKernelBench checkout's problems as tasks.

A checkout has `reference/<id>_<name>.py` (each defines `solution(...)`, the NCCL reference) and
`utils/input_output_tensors.py: create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial,
device)`. Each problem becomes the task `pkb<id>_<name>`, set up as PKB's harness runs it: inputs from that
builder in PKB's dtype (bfloat16 unless asked otherwise) with base_shape (m, n) (screen 64x64, full
1024x1024, PKB's default; a block size among the inputs grows the screen base), and outputs compared as
PKB compares them (compare.py). World size 1 upwards, as PKB's harness allows.

The task's seed reaches PKB's builder through its `trial` argument (the builder seeds from problem, rank
and trial alone): a scorer's secret seed gives inputs nobody saw before (seed 0 keeps PKB's own trials).
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import threading
from dataclasses import dataclass

import torch

from tasks.api import Output, TaskContext, WorldSizes
from tasks.parallelkernelbench.compare import ATOL, RTOL, pkb_mismatch
from tasks.parallelkernelbench.naming import DTYPES, Checkout, problem_key
from tasks.registry import TaskSpec, register_external

SIZES = {"screen": {"m": 64, "n": 64}, "full": {"m": 1024, "n": 1024}}
MAX_OUTPUTS = 32  # PKB does not declare outputs; compare up to this many top-level ones, each recursively
ID_BASE = 100000
TRIALS_PER_SEED = 1024  # PKB trial = trial + seed * this; PKB's seed arithmetic stays within 64 bits
SEED_RANGE = 1 << 30


class CheckoutError(Exception):
    """The folder is not a usable ParallelKernelBench checkout."""


def load_module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def problems(root: str) -> dict[int, str]:
    """PKB problem id -> reference file, from the checkout's reference/ folder."""
    ref_dir = os.path.join(root, "reference")
    if not os.path.isdir(ref_dir) or not os.path.isfile(os.path.join(root, "utils", "input_output_tensors.py")):
        raise CheckoutError(f"{root} is not a ParallelKernelBench checkout (it needs reference/ and "
                            f"utils/input_output_tensors.py); pass the repository's root to --pkb-root")
    found = {}
    for f in sorted(os.listdir(ref_dir)):
        key = problem_key(f[:-3]) if f.endswith(".py") else None
        if key:
            found.setdefault(key[0], os.path.join(ref_dir, f))
    return found


def torch_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise CheckoutError(f"--pkb-dtype {name!r} is not one of PKB's dtypes ({', '.join(DTYPES)})")
    return getattr(torch, name)


class Reference:
    """A problem's reference `solution`, its module imported once in this process (a torchrun rank), when first
    needed: registering a checkout imports none of its references (87 at HEAD, 0.17 s of every screen; one of
    them imports triton)."""

    def __init__(self, path: str, slug: str):
        self.path, self.slug = path, slug
        self._module = None
        self._lock = threading.Lock()

    @property
    def module(self):
        if self._module is not None:  # every call asks: no lock once imported
            return self._module
        with self._lock:
            if self._module is None:
                module = load_module(self.path, f"pkb_reference_{self.slug}")
                if not callable(getattr(module, "solution", None)):
                    raise CheckoutError(f"{self.path} defines no solution(...); is this a ParallelKernelBench "
                                        f"reference?")
                self._module = module
            return self._module

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.module.solution)

    def __call__(self, *args):
        return self.module.solution(*args)


@dataclass
class Inputs:
    """A problem's inputs from the checkout's builder, at the preset's base shape in PKB's dtype.

    At screen size a power-of-two integer input larger than the base shape is taken as a block size the
    shape must hold (problem 19 quantises 128-wide blocks): the base grows to it, up to the full size."""
    builder: object
    pid: int
    slug: str
    dtype: torch.dtype

    def __call__(self, ctx: TaskContext) -> tuple:
        return self.fresh(ctx)

    def fresh(self, ctx: TaskContext) -> tuple:
        m, n = ctx.size["m"], ctx.size["n"]
        args = self.build(ctx, m, n)
        block = max([v for v in args if _is_block(v)], default=0) if ctx.preset == "screen" else 0
        if block > min(m, n):
            side = min(block, *SIZES["full"].values())
            args = self.build(ctx, max(m, side), max(n, side))
        return args

    def build(self, ctx: TaskContext, m: int, n: int) -> tuple:
        return self.call_builder(ctx, m, n)

    def pkb_trial(self, ctx: TaskContext) -> int:
        """The builder's `trial` argument: the task's seed moves it past every trial PKB's harness uses."""
        return ctx.trial + (ctx.seed % SEED_RANGE) * TRIALS_PER_SEED

    def call_builder(self, ctx: TaskContext, m: int, n: int) -> tuple:
        out = self.builder.create_input_tensor(ctx.rank, ctx.world_size, self.pid, (m, n), self.dtype,
                                               self.pkb_trial(ctx), ctx.device)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _is_block(v) -> bool:
    return type(v) is int and v > 0 and v & (v - 1) == 0


_origin: dict[str, Checkout] = {}  # task slug -> the checkout it was last registered from


def load_specs(checkout: Checkout, reference=Reference, inputs=Inputs) -> dict[int, TaskSpec]:
    """PKB id -> TaskSpec for every problem of the checkout (`reference` and `inputs` build each problem's
    reference callable and input builder: the simulator passes its own)."""
    root = os.path.abspath(checkout.root)
    dtype = torch_dtype(checkout.dtype)
    refs = problems(root)
    if root not in sys.path:
        sys.path.insert(0, root)  # references and builders import `utils.*` from the checkout
    builder = load_module(os.path.join(root, "utils", "input_output_tensors.py"), "pkb_checkout_inputs")
    outputs = tuple(Output(f"output_{i}", dtype, rtol=RTOL, atol=ATOL, check=pkb_mismatch) for i in range(MAX_OUTPUTS))
    specs = {}
    for pid, path in refs.items():
        stem = os.path.basename(path)[:-3]
        slug = "pkb" + stem
        specs[pid] = TaskSpec(slug, ID_BASE + pid, f"ParallelKernelBench problem {pid} ({stem})", "external",
                              f"ParallelKernelBench {path}", WorldSizes(min=1), SIZES, outputs,
                              inputs(builder, pid, slug, dtype), reference(path, slug), None, builder)
    return specs


def register(specs: dict[int, TaskSpec], checkout: Checkout, known: dict | None = None) -> dict[int, str]:
    """Make the specs reachable by tasks.registry.get; returns PKB id -> task slug."""
    for spec in specs.values():
        register_external(spec)
        _origin[spec.slug] = Checkout(os.path.abspath(checkout.root), checkout.dtype)
        if known is not None:
            known[spec.slug] = spec
    return {pid: spec.slug for pid, spec in specs.items()}


_loaded: dict[Checkout, dict[int, TaskSpec]] = {}


def register_checkout(checkout: Checkout, known: dict | None = None) -> dict[int, str]:
    """Register every problem of the checkout as a plain task (once per process): how a scoring rank runs it."""
    key = Checkout(os.path.abspath(checkout.root), checkout.dtype)
    if key not in _loaded:
        _loaded[key] = load_specs(key)
    return register(_loaded[key], key, known)


def checkout_of(slug: str) -> Checkout | None:
    """The checkout a registered ParallelKernelBench task came from (None for the suite's own tasks)."""
    return _origin.get(slug)
