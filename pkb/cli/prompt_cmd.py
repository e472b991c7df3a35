"""`pkb prompt`: a task as a self-contained prompt for a code model."""
from __future__ import annotations

import inspect
import json

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


def add_parser(sub) -> None:
    p = sub.add_parser("prompt", help="a task as a self-contained prompt for a code model",
                       description="Print a task as a prompt: what to write, the reference and its inputs, sizes, "
                                   "world sizes, tolerances and the machine. Exit: 0, 2 bad usage.")
    p.add_argument("--task", required=True, help="task slug or id")
    p.add_argument("--backend", choices=sorted(GUIDANCE), default="cuda", help="what the solution should use")
    p.add_argument("--topology", default="hgx-h100", metavar="NAME", help="the machine the solution runs on")
    p.add_argument("--json", action="store_true", help="print {task, backend, prompt} as JSON")
    p.set_defaults(run=run)


def build(task, backend: str, topo) -> str:
    src = inspect.getsource(task.module)
    g = topo.gpu
    nv = f", NVLink {topo.nvlink.generation} ({topo.nvlink.links_per_gpu} x {topo.nvlink.link_GBps:g} GB/s per GPU)" \
        if topo.nvlink else ""
    outs = "; ".join(f"{o.name}: {str(o.dtype).replace('torch.', '')}, rtol={o.tolerance[0]:g}, atol={o.tolerance[1]:g}"
                     for o in task.outputs)
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
        "## The task module (reference, inputs, sizes)",
        "```python",
        src.rstrip(),
        "```",
    ])


def run(args) -> int:
    from pkb.resolve import task_or_usage
    from pkb.resolve import load

    task = task_or_usage(args.task)
    text = build(task, args.backend, load(args.topology))
    print(json.dumps({"task": task.slug, "backend": args.backend, "prompt": text}, indent=1) if args.json else text)
    return 0
