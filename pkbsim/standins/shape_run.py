"""What a shape run (`--shape-run`, FakeTensorMode) needs beyond fake tensors.

`model.to(device)` on a module built under FakeTensorMode swaps each parameter with its converted self
(`torch.utils.swap_tensors`), which refuses a fake parameter that torch's fake-tensor memo holds a weak reference
to ("_apply(): Couldn't swap Embedding.weight", also without pkb). On a simulated rank the move to the rank's own
GPU changes nothing: the converted parameter is a view of the same fake storage with the same shape, strides,
dtype and device. Such a swap is skipped (it would exchange two equal descriptions of one tensor); any other swap
is torch's.

DDP's constructor checks the parameters' shapes across ranks in C++ (`dist._verify_params_across_processes`),
writing them into a tensor it makes with `at::empty`, which a shape run makes fake ("its data is not allocated
yet"). The check runs with fake mode set aside: it reads only the fake parameters' sizes and strides, and its
all_gather of them is still simulated.

With `values` (`pkb check --shape-run`; the screen's cost stage keeps every tensor fake and a read an error):
a read of a tensor's value (`loss.item()`, `if torch.isnan(loss):`, `.tolist()`) has no answer without data
(torch raises DataDependentOutputException). A shape run answers it with a stand-in, 1 for a number and False
for a condition, and says so: one `stand_in` note per call site (the first 8), which names the value it took.
Branches that depend on such a value follow the stand-in, not the data; the rest of the run (every collective,
its shapes and order) is checked as usual. A 0-dim fake tensor in an f-string with a format spec (`f"{loss:.4f}"`)
is formatted as its stand-in too, as a real tensor formats its item.

Small tensors are real: an op whose tensor inputs are all real (none fake) and have at most SMALL_NUMEL elements
together, or a factory (`torch.arange`, `torch.randint`) whose output has at most that many, runs on data. Indices drawn at random
(`ix = torch.randint(...)`, then `data[i:i + block_size]`), a device mesh's rank table and counters then have
their values, and only values computed from large (fake) tensors, such as a loss, need a stand-in.
"""
from __future__ import annotations

import os
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensor

from pkbsim.world.context import current
from pkbsim.world.findings import Finding
from pkbsim.world.patching import Patches
from pkbsim.world.sites import _is_plumbing

MAX_STAND_IN_NOTES = 8
SMALL_NUMEL = 1 << 16


def _same(t1, t2) -> bool:
    return (isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor)
            and t1.untyped_storage()._cdata == t2.untyped_storage()._cdata
            and t1.shape == t2.shape and t1.stride() == t2.stride() and t1.storage_offset() == t2.storage_offset()
            and t1.dtype == t2.dtype and t1.device == t2.device and t1.requires_grad == t2.requires_grad)


def _swap(real):
    def swap_tensors(t1, t2):
        if _same(t1, t2):
            return None
        return real(t1, t2)
    return swap_tensors


def _real_mode(real):
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    def call(*args, **kwargs):
        with unset_fake_temporarily():
            return real(*args, **kwargs)
    return call


def stand_in(dtype: torch.dtype):
    return False if dtype == torch.bool else 1.0 if (dtype.is_floating_point or dtype.is_complex) else 1


def _site() -> str:
    """The program's line that read the value (numpy's indexing frames skipped: `data[i:i + n]`)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not _is_plumbing(name) and os.sep + "numpy" + os.sep not in name:
            return f"{os.path.basename(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _format(real):
    def __format__(self, spec):
        if self.dim() == 0 and spec:
            return self.item().__format__(spec)
        return real(self, spec)
    return __format__


def _local_scalar(real):
    from torch._subclasses.fake_tensor import DataDependentOutputException
    seen: set[str] = set()

    def local_scalar_dense(fake_mode, func, arg):
        try:
            return real(fake_mode, func, arg)
        except DataDependentOutputException:
            value = stand_in(arg.dtype)
        ctx = current()
        site = _site()
        if ctx is not None and site not in seen and len(seen) < MAX_STAND_IN_NOTES:
            seen.add(site)
            ctx.world.add_finding(Finding(
                "stand_in", f"rank {ctx.rank} read a {str(arg.dtype).removeprefix('torch.')} value at {site}, which "
                f"a shape run does not have (no data): it went on with {value!r}; branches that depend on it "
                f"follow that value, not the data", [ctx.rank], [site]))
        return value
    return local_scalar_dense


def _tensors(tree) -> list:
    from torch.utils._pytree import tree_leaves
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _small_real(real_dispatch):
    """FakeTensorMode.dispatch that runs an op on data when no input is fake and its output is small."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    def dispatch(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = _tensors((args, kwargs))
        if inputs and not any(isinstance(t, FakeTensor) for t in inputs) \
                and sum(t.numel() for t in inputs) <= SMALL_NUMEL and not any(t.is_meta for t in inputs):
            with unset_fake_temporarily():    # small real inputs: the op on data
                return func(*args, **kwargs)
        out = real_dispatch(self, func, types, args, kwargs)
        if inputs:
            return out
        outs = _tensors(out)     # a factory: on data when its output is small
        if not outs or not all(isinstance(t, FakeTensor) for t in outs) or sum(t.numel() for t in outs) > SMALL_NUMEL:
            return out
        with unset_fake_temporarily():
            return func(*args, **kwargs)
    return dispatch


def install_shape_run(patches: Patches, values: bool = False) -> None:
    import torch.distributed as dist
    from torch._subclasses import fake_impls
    from torch._subclasses.fake_tensor import FakeTensorMode

    patches.set(torch.utils, "swap_tensors", _swap(torch.utils.swap_tensors))
    patches.set(dist, "_verify_params_across_processes", _real_mode(dist._verify_params_across_processes))
    if values:
        op = torch.ops.aten._local_scalar_dense.default
        patches.set_item(fake_impls.op_implementations_dict, op, _local_scalar(fake_impls.op_implementations_dict[op]))
        patches.set_own(FakeTensor, "__format__", _format(FakeTensor.__format__))
        patches.set(FakeTensorMode, "dispatch", _small_real(FakeTensorMode.dispatch))
