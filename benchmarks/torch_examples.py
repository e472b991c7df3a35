"""Run pytorch/examples' distributed scripts under `pkb check` as a user would run them with torchrun.

    python benchmarks/torch_examples.py EXAMPLES_DIR [--nproc 2 4] [--json OUT] [--only NAME]

EXAMPLES_DIR is a checkout of github.com/pytorch/examples (its distributed/ folder is used). Each script
runs unmodified, from its own folder, with the arguments its README gives torchrun (scaled down where the
README trains for many epochs). The table gives pkb's verdict, the number of simulated communication ops
(0 means nothing was checked) and the wall time; numbers, not asserts.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Example:
    name: str
    folder: str          # relative to distributed/
    script: str
    args: tuple = ()


EXAMPLES = (
    Example("ddp", "ddp", "example.py"),
    Example("ddp-tutorial multigpu_torchrun", "ddp-tutorial-series", "multigpu_torchrun.py", ("2", "1")),
    Example("ddp-tutorial multinode", "ddp-tutorial-series", "multinode.py", ("2", "1")),
    # the README's config downloads its data and trains a 8-layer model for 10 epochs: the bundled copy of the
    # data and a small model for one epoch instead
    Example("minGPT-ddp", "minGPT-ddp/mingpt", "main.py", (
        "data_config.path=data/input.txt", "data_config.truncate=0.002", "trainer_config.max_epochs=1",
        "trainer_config.batch_size=16", "trainer_config.data_loader_workers=0", "gpt_config.n_layer=2",
        "gpt_config.n_embd=64", "gpt_config.n_head=4")),
    Example("tensor_parallel", "tensor_parallelism", "tensor_parallel_example.py"),
    Example("sequence_parallel", "tensor_parallelism", "sequence_parallel_example.py"),
    Example("fsdp_tp", "tensor_parallelism", "fsdp_tp_example.py"),
    Example("FSDP2", "FSDP2", "example.py"),
)


@dataclass
class Outcome:
    example: str
    nproc: int
    verdict: str
    exit_code: int
    ops: int
    wall_s: float
    message: str


def check(pkb: str, root: str, ex: Example, nproc: int, timeout: float) -> Outcome:
    cwd = os.path.join(root, "distributed", ex.folder)
    cmd = [pkb, "check", "--nproc-per-node", str(nproc), "--json", "--timeout", str(timeout), ex.script, *ex.args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout + 120)
    wall = time.perf_counter() - t0
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Outcome(ex.name, nproc, "pkb error", proc.returncode, 0, round(wall, 2), tail[:160])
    findings = doc.get("findings") or []
    msg = findings[0].get("message", "") if findings else ""
    return Outcome(ex.name, nproc, doc.get("verdict", "?"), proc.returncode, doc.get("ops", 0), round(wall, 2),
                   msg.splitlines()[0][:160] if msg else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("examples_dir", help="a checkout of pytorch/examples")
    ap.add_argument("--nproc", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these examples (names as in the table)")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--pkb", default=os.path.join(os.path.dirname(sys.executable), "pkb"))
    args = ap.parse_args()
    rows = []
    for ex in EXAMPLES:
        if args.only and ex.name not in args.only:
            continue
        for n in args.nproc:
            o = check(args.pkb, args.examples_dir, ex, n, args.timeout)
            rows.append(o)
            print(f"{o.example:32} {o.nproc:>2} {o.verdict:14} exit {o.exit_code:<3} ops {o.ops:>6} "
                  f"{o.wall_s:>7.1f} s  {o.message}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
