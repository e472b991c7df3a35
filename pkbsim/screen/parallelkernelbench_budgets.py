"""Budgets that keep a ParallelKernelBench problem within what the simulator can run on a CPU.

Some ParallelKernelBench problems have fixed sizes that ignore the base shape (problem 68 builds a 111 M-node
embedding table, 76 a large Conv3d, 77 a 10,800-token attention): at any screen size they would take gigabytes
or many minutes per rank. Inputs are built under a byte budget and the reference runs under a FLOP budget;
both are checked before an operation runs, so nothing large is allocated or computed. Going over raises
PkbLimitExceeded: a limit of pkb (the screen is inconclusive), never the candidate's fault.

The input budget follows the memory the screen has: the process's address-space limit (a screen worker's
--memory-gb) or, without one, the machine's physical memory, less what the interpreter, torch and the
ranks' threads take before any input, shared among what the screen holds at once in units of one call's
inputs (HELD). At the default 12 GB per worker that is 0.83 GiB for all ranks' inputs of a call.
"""
from __future__ import annotations

import os
import resource

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

from pkbsim.errors import SimulatorLimit
from pkbsim.world.flop_formulas import flop_registry
from pkbsim.world.eager_mode import EagerDispatchMode

# Both budgets are for all ranks together, which share one process and the CPU's cores: a rank gets its share
BASELINE = 2 * 2**30  # address space of a screen before any input: interpreter, torch, rank threads, malloc arenas
HELD = 12  # one call's inputs, a copy of each of the 3 trials' (reused by later calls), 7 calls' outputs (often
#            as large as the inputs), and the call's temporaries
FLOPS = 200e9        # one reference call (the screen makes several; about 40 GFLOP/s on a core)


def memory_limit() -> int:
    """Bytes this process may use: its address-space limit, else the machine's physical memory."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        return soft
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def input_budget() -> int:
    """Bytes all ranks' inputs of one call may take."""
    return max(0, memory_limit() - BASELINE) // HELD

# the CPU's attention kernel has no formula of its own in torch.utils.flop_counter; it counts as flash attention
_FORMULAS = {**flop_registry, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu:
             flop_registry[torch.ops.aten._scaled_dot_product_flash_attention]}


class PkbLimitExceeded(SimulatorLimit):
    """A problem needs more memory or time than the simulator has at this size (pkb's limit, named: the
    screen calls the candidate inconclusive)."""

    def __init__(self, task: str, limit: str, message: str):
        super().__init__(message)
        self.task, self.limit = task, limit  # limit: "memory" or "time"


class InputBudget(EagerDispatchMode):
    """Raises before a factory (randn, empty, zeros, ...) would allocate more than all ranks' inputs may hold
    together (a temporary the builder frees is fine), and on `check` if the inputs a rank keeps hold more
    than its share (this also counts factories without a size argument, such as eye)."""

    def __init__(self, what: str, world_size: int, budget: int | None = None):
        super().__init__()
        budget = input_budget() if budget is None else budget
        self.what, self.total, self.budget = what, budget, budget // world_size

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        size = _size_argument(func, args, kwargs)
        if size is not None:
            dtype = kwargs.get("dtype") or (args[0].dtype if func.__name__.startswith("new_") else
                                            torch.get_default_dtype())
            if _numel(size) * torch.empty((), dtype=dtype).element_size() > self.total:
                raise self.exceeded(f"a tensor of shape {tuple(size)}")
        return func(*args, **kwargs)

    def check(self, inputs) -> None:
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                    for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.layout == torch.strided}
        if sum(storages.values()) > self.budget:
            raise self.exceeded(f"it keeps {sum(storages.values()) / 2**20:.2f} MiB")

    def exceeded(self, detail: str) -> PkbLimitExceeded:
        return PkbLimitExceeded(self.what, "memory", f"the inputs of {self.what} need more than "
                                f"{_gib(self.budget)} per rank ({detail}): beyond the screen's memory "
                                f"({_gib(memory_limit())}, {HELD} times one call's inputs held at once) at any "
                                f"screen size")


class FlopBudget(EagerDispatchMode):
    """Raises before a matmul, convolution or attention would take the call over the budget."""

    def __init__(self, what: str, world_size: int, budget: float = FLOPS):
        super().__init__()
        self.what, self.budget, self.used = what, budget / world_size, 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        formula = _FORMULAS.get(func._overloadpacket)
        if formula is not None:
            self.used += _flops(formula, func, args, kwargs)
            if self.used > self.budget:
                raise PkbLimitExceeded(self.what, "time", f"the reference of {self.what} needs more than "
                                       f"{self.budget:.2g} FLOPs per rank and call: beyond the simulator's time "
                                       f"limit at any screen size")
        return func(*args, **kwargs)


def _size_argument(func, args, kwargs):
    """The `size` argument of a factory op, if `func` is one."""
    for i, a in enumerate(func._schema.arguments):
        if a.name == "size":
            v = kwargs.get("size") if a.kwarg_only or i >= len(args) else args[i]
            return v if isinstance(v, (list, tuple)) else None
    return None


# ops whose FLOP formula reads its inputs' shapes alone: counted without running the op on the meta device,
# whose shape checks (torch._check) import torch's symbolic-shapes module and sympy on first use, 1.7 s of a
# warm screen's 10 CPU-s (benchmarks/screen_profile.py)
_INPUT_SHAPED = frozenset({torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
                           torch.ops.aten.baddbmm.default})
# convolutions whose output shape follows from their arguments here, as the meta kernel computes it (same reason)
_CONVOLUTIONS = frozenset({torch.ops.aten.convolution.default, torch.ops.aten._convolution.default})


def _convolution_shape(args) -> list[int] | None:
    """The output shape of aten.convolution / aten._convolution (input, weight, bias, stride, padding, dilation,
    transposed, ...) for a batched, non-transposed convolution with integer lists; None for anything else (the
    meta kernel decides: a transposed one's count reads the input's shape, not the output's)."""
    if len(args) < 7 or not isinstance(args[0], torch.Tensor) or not isinstance(args[1], torch.Tensor):
        return None
    x, w, _, stride, padding, dilation, transposed = args[:7]
    spatial = x.dim() - 2
    if transposed or spatial < 1 or w.dim() != x.dim():
        return None
    params = []
    for p in (stride, padding, dilation):
        if not isinstance(p, (list, tuple)) or not all(type(v) is int for v in p) or len(p) not in (1, spatial):
            return None
        params.append(list(p) * spatial if len(p) == 1 else list(p))
    stride, padding, dilation = params
    out = [(x.shape[2 + i] + 2 * padding[i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1
           for i in range(spatial)]
    return [x.shape[0], w.shape[0], *out] if all(o > 0 for o in out) and min(stride) > 0 else None


def _flops(formula, func, args, kwargs) -> float:
    """The op's FLOPs from its shapes: the inputs' for a product (_INPUT_SHAPED), else the output's shape
    comes from running the op on the meta device. A sparse operand is not counted (the formulas are for dense
    operands; problem 62's bmm has 1,536 non-zeros where the dense count is 2e10)."""
    if any(isinstance(x, torch.Tensor) and x.layout != torch.strided for x in tree_flatten((args, kwargs))[0]):
        return 0.0

    def meta(x):
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        return x
    try:
        if func in _INPUT_SHAPED:
            return float(formula(*args, **kwargs, out_val=None))
        shape = _convolution_shape(args) if func in _CONVOLUTIONS and not kwargs else None
        if shape is not None:
            return float(formula(*args, out_val=torch.Size(shape)))
        with _disable_current_modes():  # the modes below (the rank's compute trace) must not see the meta call
            margs, mkwargs = tree_map(meta, (args, kwargs))
            return float(formula(*margs, **mkwargs, out_val=func(*margs, **mkwargs)))
    except Exception:  # noqa: BLE001 - no meta kernel or formula mismatch (the op raises its own error): not counted
        return 0.0


def _numel(size) -> int:
    n = 1
    for s in size:
        n *= int(s)
    return n


def _gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.3g} MiB"
