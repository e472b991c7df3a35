"""Run pytorch/examples' distributed scripts under `pkb check` as a user would run them with torchrun.

    python benchmarks/torch_examples.py EXAMPLES_DIR [--nproc 2 4] [--json OUT] [--only NAME...]

EXAMPLES_DIR is a checkout of github.com/pytorch/examples (its distributed/ folder is used). Each script
runs unmodified, from its own folder, with the arguments its README gives (scaled down where the README
trains for many epochs). The table gives pkb's verdict, the number of simulated communication ops (0 means
nothing was checked) and the wall time; numbers, not asserts. A script whose Python packages are missing is
skipped, naming them.
"""
from __future__ import annotations

import argparse
import importlib.util
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
    needs: tuple = ()      # Python packages the script imports beyond torch
    skip: str = ""         # why pkb check is not run on it at all


EXAMPLES = (
    Example("ddp", "ddp", "example.py"),
    Example("ddp-tutorial multigpu_torchrun", "ddp-tutorial-series", "multigpu_torchrun.py", ("2", "1")),
    Example("ddp-tutorial multinode", "ddp-tutorial-series", "multinode.py", ("2", "1")),
    # one process on cuda:0, no process group: each simulated rank trains alone (nothing to check)
    Example("ddp-tutorial single_gpu", "ddp-tutorial-series", "single_gpu.py", ("2", "1")),
    Example("ddp-tutorial multigpu (mp.spawn)", "ddp-tutorial-series", "multigpu.py", ("2", "1")),
    # the README's config downloads its data and trains a 8-layer model for 10 epochs: the bundled copy of the
    # data and a small model for one epoch instead
    Example("minGPT-ddp", "minGPT-ddp/mingpt", "main.py", (
        "data_config.path=data/input.txt", "data_config.truncate=0.002", "trainer_config.max_epochs=1",
        "trainer_config.batch_size=16", "trainer_config.data_loader_workers=0", "gpt_config.n_layer=2",
        "gpt_config.n_embd=64", "gpt_config.n_head=4"), needs=("hydra",)),
    Example("tensor_parallel", "tensor_parallelism", "tensor_parallel_example.py"),
    Example("sequence_parallel", "tensor_parallelism", "sequence_parallel_example.py"),
    Example("fsdp_tp", "tensor_parallelism", "fsdp_tp_example.py"),
    Example("FSDP2", "FSDP2", "example.py"),
    Example("FSDP T5_training", "FSDP", "T5_training.py", skip="downloads its dataset (download_dataset.sh) "
            "and the t5 model from the Hugging Face hub"),
    Example("rpc ddp_rpc", "rpc/ddp_rpc", "main.py"),
    Example("rpc rnn", "rpc/rnn", "main.py"),
    Example("rpc pipeline", "rpc/pipeline", "main.py", needs=("torchvision",)),
    Example("rpc rl", "rpc/rl", "main.py", needs=("gymnasium",)),
    Example("rpc batch parameter_server", "rpc/batch", "parameter_server.py"),
    Example("rpc batch reinforce", "rpc/batch", "reinforce.py", needs=("gymnasium",)),
    Example("rpc parameter_server", "rpc/parameter_server", "rpc_parameter_server.py",
            skip="downloads MNIST (and is started once per rank by hand, with mp.Process)"),
)


@dataclass
class Outcome:
    example: str
    nproc: int
    verdict: str
    exit_code: int | None
    ops: int
    wall_s: float | None
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
                   msg.splitlines()[0][:200] if msg else "")


def missing(ex: Example) -> list[str]:
    return [m for m in ex.needs if importlib.util.find_spec(m) is None]


def run_one(args, ex: Example, n: int) -> Outcome:
    if ex.skip:
        return Outcome(ex.name, n, "skipped", None, 0, None, ex.skip)
    if missing(ex):
        why = f"needs {', '.join(missing(ex))}, not installed"
        return Outcome(ex.name, n, "skipped", None, 0, None, why)
    return check(args.pkb, args.examples_dir, ex, n, args.timeout)


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
            o = run_one(args, ex, n)
            rows.append(o)
            wall = f"{o.wall_s:7.1f} s" if o.wall_s is not None else "      -  "
            print(f"{o.example:34} {o.nproc:>2} {o.verdict:15} exit {o.exit_code!s:<4} ops {o.ops:>6} {wall}  "
                  f"{o.message}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
