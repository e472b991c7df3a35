"""The Task API: what a task module declares, the context its inputs are built from, and how outputs
are compared.

A task is one module in a category sub-package (tasks/collective/, tasks/fused/, tasks/parallelism/)
that defines, at module level:

    SLUG, ID, TITLE, CATEGORY, ORIGIN    identity (ORIGIN: the real system the pattern comes from)
    WORLD_SIZES                          a WorldSizes rule
    SIZES = {"screen": {...}, "full": {...}}   keyword sizes handed to make_inputs through ctx.size
    OUTPUTS = [Output(...), ...]         one spec per returned tensor (dtype, tolerance, NaN policy)
    make_inputs(ctx) -> tuple            this rank's inputs (random; process groups built here)
    reference(*inputs) -> Tensor | tuple the PyTorch + torch.distributed reference
    speed_of_light(size, world_size) -> dict   optional: {"link_bytes_per_rank", "flops"}

Candidates define `solution(*inputs)` with the reference's signature; it is called on every rank,
inside an initialised process group, on that rank's device.
"""
from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

CATEGORIES = ("collective", "fused", "parallelism", "application", "internode")

# default tolerances per output dtype: (rtol, atol)
_TOLERANCE = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
    torch.float8_e4m3fn: (1.25e-1, 1e-1),
    torch.float8_e5m2: (2.5e-1, 1e-1),
}
BF16_UNIT_ROUNDOFF = 2.0 ** -8


@dataclass(frozen=True)
class WorldSizes:
    """Which world sizes a task supports, as a rule (not a list)."""

    min: int = 2
    max: int | None = None
    multiple_of: int = 1
    power_of_two: bool = False

    def __call__(self, n: int) -> bool:
        if n < self.min or (self.max is not None and n > self.max) or n % self.multiple_of:
            return False
        return not self.power_of_two or (n & (n - 1)) == 0

    def describe(self) -> str:
        parts = [f">= {self.min}"]
        if self.max is not None:
            parts.append(f"<= {self.max}")
        if self.multiple_of > 1:
            parts.append(f"multiple of {self.multiple_of}")
        if self.power_of_two:
            parts.append("power of two")
        return ", ".join(parts)


@dataclass(frozen=True)
class Output:
    """How one output is compared: exact dtype, shape (optional rule), tolerance and NaN policy."""

    name: str
    dtype: torch.dtype
    rtol: float | None = None  # None: the dtype's default
    atol: float | None = None
    nan: str = "forbid"  # forbid: any NaN fails; equal: NaNs must sit where the reference has them
    shape: Callable[[dict, int, int], tuple] | None = None  # (size, world_size, rank) -> shape
    # a comparison of its own, (out, ref, name) -> None or one line, for outputs that are not one tensor
    # of a known dtype (a ParallelKernelBench problem may return nested dicts, sequences, None, sizes)
    check: Callable[[Any, Any, str], str | None] | None = None

    @property
    def tolerance(self) -> tuple[float, float]:
        rtol, atol = _TOLERANCE.get(self.dtype, (0.0, 0.0))
        return (self.rtol if self.rtol is not None else rtol, self.atol if self.atol is not None else atol)

    @property
    def admits_bf16(self) -> bool:
        """Whether this tolerance should accept a result computed in bf16 (rounding error 2^-8)."""
        return self.dtype.is_floating_point and self.tolerance[0] >= BF16_UNIT_ROUNDOFF


@dataclass
class TaskContext:
    """What make_inputs knows: who it is, the preset's sizes, and deterministic random sources.

    Every random tensor is drawn on the CPU from a generator seeded by (seed, trial, rank) and then moved
    to the device, so the simulator and real GPUs see the same inputs for the same seed.
    """

    rank: int
    world_size: int
    seed: int
    trial: int
    preset: str
    size: dict
    device: torch.device
    _generators: dict = field(default_factory=dict)

    def generator(self, shared: bool = False) -> torch.Generator:
        """This rank's generator, or with shared=True one that every rank draws identically."""
        key = ("shared",) if shared else ("rank", self.rank)
        gen = self._generators.get(key)
        if gen is None:
            digest = hashlib.sha256(repr((self.seed, self.trial, key)).encode()).digest()
            gen = self._generators[key] = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)
        return gen

    def randn(self, *shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0,
              shared: bool = False) -> torch.Tensor:
        t = torch.randn(*shape, generator=self.generator(shared), device="cpu") * scale
        return t.to(dtype=dtype).to(self.device)

    def rand(self, *shape: int, dtype: torch.dtype = torch.float32, shared: bool = False) -> torch.Tensor:
        return torch.rand(*shape, generator=self.generator(shared), device="cpu").to(dtype=dtype).to(self.device)

    def randint(self, low: int, high: int, shape: tuple, dtype: torch.dtype = torch.int64,
                shared: bool = False) -> torch.Tensor:
        t = torch.randint(low, high, shape, generator=self.generator(shared), device="cpu", dtype=dtype)
        return t.to(self.device)

    def randperm(self, n: int, shared: bool = False) -> torch.Tensor:
        return torch.randperm(n, generator=self.generator(shared), device="cpu").to(self.device)


def warm_up(groups, device: torch.device) -> None:
    """Create the NCCL communicators of process groups built in make_inputs now (NCCL creates them lazily,
    at first use) so that no timed call pays for it. Every rank must warm its groups in the same order."""
    import torch.distributed as dist
    for g in groups:
        dist.all_reduce(torch.zeros(1, device=device), group=g)


def flat_tensors(x: Any) -> list[torch.Tensor]:
    """The tensors in (nested) tuples, lists and dict values of inputs or outputs, in order."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in flat_tensors(y)]
    return []


def _storages(t: torch.Tensor) -> list[int]:
    """Where a tensor's data lives: its storage, or a sparse COO tensor's indices and values (a sparse tensor
    has no storage of its own: asking raises); other layouts are not checked."""
    if not t.numel():
        return []
    if t.layout == torch.strided:
        return [t.untyped_storage().data_ptr()]
    if t.layout == torch.sparse_coo:
        return [p for part in (t._indices(), t._values()) for p in _storages(part)]
    return []


def aliased_outputs(outputs: tuple, inputs: Any) -> list[int]:
    """Indices of the top-level outputs that hold a tensor sharing memory with an input tensor (a scorer
    takes that as an integrity violation unless the reference does it too)."""
    storages = {p for t in flat_tensors(inputs) for p in _storages(t)}
    return [i for i, o in enumerate(outputs) if any(p in storages for t in flat_tensors(o) for p in _storages(t))]


def as_outputs(result: Any) -> tuple:
    """A reference or solution may return one tensor or a tuple/list of them."""
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def signature_problem(solution: Any, reference: Callable) -> str | None:
    """None if `solution` can be called the way the harness calls the reference (positionally, with the
    reference's parameters), else one line saying what is wrong."""
    if not callable(solution):
        return "the candidate defines no solution(...) function"
    want = list(inspect.signature(reference).parameters)
    try:
        params = list(inspect.signature(solution).parameters.values())
    except (TypeError, ValueError):
        return None  # a builtin or extension function: only a call can tell
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) <= len(want) <= len(positional):
        return None
    return (f"solution takes {len(positional)} parameters ({', '.join(p.name for p in positional)}); the task's "
            f"signature is solution({', '.join(want)})")


def compare(out: Any, ref: Any, spec: Output) -> str | None:
    """None if `out` matches `ref` under `spec`, else one line saying how it differs."""
    if spec.check is not None:
        return spec.check(out, ref, spec.name)
    if not isinstance(out, torch.Tensor):
        return f"{spec.name}: expected a tensor, got {type(out).__name__}"
    if out.dtype != ref.dtype:
        return f"{spec.name}: dtype {out.dtype} != expected {ref.dtype}"
    if tuple(out.shape) != tuple(ref.shape):
        return f"{spec.name}: shape {tuple(out.shape)} != expected {tuple(ref.shape)}"
    o, r = out.detach().cpu(), ref.detach().cpu()
    if not o.dtype.is_floating_point:
        bad = (o != r).sum().item()
        return f"{spec.name}: {bad} of {r.numel()} elements differ" if bad else None
    o, r = o.double(), r.double()
    o_nan, r_nan = torch.isnan(o), torch.isnan(r)
    if spec.nan == "forbid" and o_nan.any():
        return f"{spec.name}: {int(o_nan.sum())} NaN values"
    if spec.nan == "equal" and not torch.equal(o_nan, r_nan):
        return f"{spec.name}: NaNs at different positions than the reference"
    rtol, atol = spec.tolerance
    o, r = torch.where(r_nan, 0.0, o), torch.where(r_nan, 0.0, r)
    err = (o - r).abs()
    bad = err > atol + rtol * r.abs()
    if bad.any():
        i = int(torch.argmax((err - atol - rtol * r.abs()).reshape(-1)))
        return (f"{spec.name}: {int(bad.sum())} of {r.numel()} elements outside rtol={rtol:g} atol={atol:g} "
                f"(worst at flat index {i}: got {o.reshape(-1)[i].item():.6g}, expected {r.reshape(-1)[i].item():.6g})")
    return None
