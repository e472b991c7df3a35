"""ParallelKernelBench problems as tasks, loaded from a user's checkout at run time (never copied here).

A checkout has `reference/<id>_<name>.py` (each defines `solution(...)`, the NCCL reference) and
`utils/input_output_tensors.py: create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial,
device)`. Each problem becomes the task `pkb<id>_<name>`; its inputs come from that builder with
base_shape (m, n) (screen 64x64, full 1024x1024, PKB's default) and its comparison is PKB's own
(atol = rtol = 1e-2 on every output).
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys

import torch

from tasks.api import Output, WorldSizes
from tasks.registry import TaskSpec, register_external

SIZES = {"screen": {"m": 64, "n": 64}, "full": {"m": 1024, "n": 1024}}
MAX_OUTPUTS = 32  # PKB does not declare outputs; compare up to this many, each at PKB's tolerance
ID_BASE = 100000


class PkbCheckoutError(Exception):
    pass


def _module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def problems(root: str) -> dict[int, str]:
    """PKB problem id -> reference file, from the checkout's reference/ folder."""
    ref_dir = os.path.join(root, "reference")
    if not os.path.isdir(ref_dir) or not os.path.isfile(os.path.join(root, "utils", "input_output_tensors.py")):
        raise PkbCheckoutError(f"{root} is not a ParallelKernelBench checkout (it needs reference/ and "
                               f"utils/input_output_tensors.py); pass the repository's root to --pkb-root")
    found = {}
    for f in sorted(os.listdir(ref_dir)):
        m = re.fullmatch(r"(\d+)_(\w+)\.py", f)
        if m:
            found.setdefault(int(m.group(1)), os.path.join(ref_dir, f))
    return found


def register_pkb_tasks(root: str, known: dict | None = None) -> dict[int, str]:
    """Register every problem of the checkout as a task; returns PKB id -> task slug."""
    root = os.path.abspath(root)
    refs = problems(root)
    if root not in sys.path:
        sys.path.insert(0, root)  # references and builders import `utils.*` from the checkout
    builder = _module(os.path.join(root, "utils", "input_output_tensors.py"), "pkb_checkout_inputs")
    ids = {}
    for pid, path in refs.items():
        stem = os.path.basename(path)[:-3]
        slug = "pkb" + stem
        ids[pid] = slug
        ref_fn = getattr(_module(path, f"pkb_reference_{pid}"), "solution", None)
        if not callable(ref_fn):
            raise PkbCheckoutError(f"{path} defines no solution(...); is this a ParallelKernelBench reference?")

        def make_inputs(ctx, pid=pid):
            base = (ctx.size["m"], ctx.size["n"])
            out = builder.create_input_tensor(ctx.rank, ctx.world_size, pid, base, torch.float32, ctx.trial,
                                              ctx.device)
            return tuple(out) if isinstance(out, (tuple, list)) else (out,)

        spec = TaskSpec(slug, ID_BASE + pid, f"ParallelKernelBench problem {pid} ({stem})", "external",
                        f"ParallelKernelBench {path}", WorldSizes(min=2), SIZES,
                        tuple(Output(f"output_{i}", torch.float32, rtol=1e-2, atol=1e-2) for i in range(MAX_OUTPUTS)),
                        make_inputs, ref_fn, None, sys.modules.get(builder.__name__, builder))
        register_external(spec)
        if known is not None:
            known[slug] = spec
    return ids
