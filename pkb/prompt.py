"""A task as a self-contained prompt for a code model (`pkb prompt`, and the first turn of `pkb refine`)."""
from __future__ import annotations

import inspect

GUIDANCE = {
    "cuda": ("Write the communication as CUDA kernels in a `torch.utils.cpp_extension.load_inline` extension "
             "(compiled for sm_90a). Peer buffers come from torch symmetric memory "
             "(`torch.distributed._symmetric_memory`: `empty`, `rendezvous`, the handle's `buffer_ptrs` and "
             "`signal_pad_ptrs`); synchronise through signal pads with release/acquire (`.sys` scope) "
             "operations. Compile the extension once at import time."),
    "triton": ("Write the kernels in Triton. Peer buffers come from torch symmetric memory "
               "(`torch.distributed._symmetric_memory`: `empty`, `rendezvous`, `get_buffer`, `signal_pad_ptrs`); "
               "synchronise through the signal pads with atomics (sem='release'/'acquire', scope='sys')."),
    "torch": "Use torch and torch.distributed (NCCL collectives, symmetric-memory ops) without custom kernels.",
}


def task_source(task) -> tuple[str, str]:
    """(heading, source) of what defines the task: its module, or for a ParallelKernelBench problem its
    reference file and the checkout's input builder."""
    path = getattr(task.reference, "path", None)
    if path and task.slug.startswith("pkb"):
        with open(path) as f:
            ref = f.read()
        return ("The reference (ParallelKernelBench) and its input builder",
                ref.rstrip() + "\n\n# --- utils/input_output_tensors.py ---\n" + inspect.getsource(task.module).rstrip())
    return "The task module (reference, inputs, sizes)", inspect.getsource(task.module).rstrip()


def build(task, backend: str, topo) -> str:
    heading, src = task_source(task)
    g = topo.gpu
    nv = f", NVLink {topo.nvlink.generation} ({topo.nvlink.links_per_gpu} x {topo.nvlink.link_GBps:g} GB/s per GPU)" \
        if topo.nvlink else ""
    tol = [f"{str(o.dtype).replace('torch.', '')}, rtol={o.tolerance[0]:g}, atol={o.tolerance[1]:g}" for o in task.outputs]
    # ParallelKernelBench problems: up to 32 outputs, one rule
    outs = (f"every output: {tol[0]}" if len(tol) > 3 and len(set(tol)) == 1
            else "; ".join(f"{o.name}: {t}" for o, t in zip(task.outputs, tol)))
    return "\n".join([
        f"# Task: {task.title} ({task.slug})",
        "",
        (f"Write a Python file that defines `{task.signature}`: the same computation as `reference` below, on every "
        f"rank, inside an initialised process group, on that rank's GPU, faster than the reference. Return new "
        f"tensors (do not modify the inputs, do not return an input), with the same dtypes and shapes."),
        "",
        f"Backend: {GUIDANCE[backend]}",
        "",
        (f"World sizes: {task.world_sizes.describe()}. Benchmark size: {task.sizes['full']} (small check size: "
        f"{task.sizes['screen']}). Outputs and tolerances: {outs}."),
        (f"Machine: {topo.title or topo.name}: {topo.num_gpus} x {g.model} ({g.sms} SMs, {g.hbm_GBps:g} GB/s HBM, "
        f"{g.l2_MB:g} MB L2){nv}."),
        f"Origin of the pattern: {task.origin}.",
        "",
        ("Correctness is checked on several trials with fresh random inputs on every rank; the time is the slowest "
        "rank's, from a barrier to a device-wide synchronisation, so all work must finish before `solution` returns."),
        "",
        f"## {heading}",
        "```python",
        src,
        "```",
    ])
