"""Run pytorch/examples' distributed scripts under `pkb check` as a user would run them, and time the ones
that plain torchrun can run on this machine (gloo, CPU) for the ratio pkb time / torchrun time.

    python benchmarks/torch_examples.py EXAMPLES_DIR [--nproc 2 4] [--json OUT] [--markdown OUT] [--only NAME...]
                                        [--no-torchrun]

EXAMPLES_DIR is a checkout of github.com/pytorch/examples (its distributed/ folder is used). Each script
runs unmodified, from its own folder, with the arguments its README gives (scaled down where the README
trains for many epochs). Rows marked "ours" are this repository's test programs with a --backend choice,
which both pkb check and plain torchrun can run. The table gives pkb's verdict, the number of simulated
communication ops (0 means nothing was checked), pkb's wall time, torchrun's wall time and the ratio, or why
torchrun cannot run the script here (each reason was seen by running it under torchrun on a CPU machine).
Numbers, not asserts. A script whose Python packages are missing is skipped, naming them.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
OURS = os.path.join(os.path.dirname(HERE), "tests", "programs")

GPU_CHECK = "exits at its GPU-count check: no accelerator on this machine"
NCCL_ONLY = "backend nccl and torch.cuda.set_device hard-coded: the CPU build has no CUDA"
SPAWNS = "not a torchrun script: run with plain python, it starts its own workers with mp.spawn"


@dataclass(frozen=True)
class Example:
    name: str
    folder: str          # relative to distributed/, or to tests/programs for ours
    script: str
    args: tuple = ()
    torchrun_args: tuple | None = None  # arguments of a plain-torchrun run on gloo; None: it cannot run here
    no_torchrun: str = ""  # why it cannot
    needs: tuple = ()      # Python packages the script imports beyond torch
    skip: str = ""         # why pkb check is not run on it at all
    ours: bool = False
    shape_run: bool = False  # `pkb check --shape-run`: fake tensors (no arithmetic) for the big configurations


EXAMPLES = (
    Example("ddp", "ddp", "example.py", no_torchrun=GPU_CHECK),
    Example("ddp-tutorial multigpu_torchrun", "ddp-tutorial-series", "multigpu_torchrun.py", ("2", "1"),
            no_torchrun=NCCL_ONLY),
    Example("ddp-tutorial multinode", "ddp-tutorial-series", "multinode.py", ("2", "1"), no_torchrun=NCCL_ONLY),
    # one process on cuda:0, no process group: each simulated rank trains alone (nothing to check)
    Example("ddp-tutorial single_gpu", "ddp-tutorial-series", "single_gpu.py", ("2", "1"),
            no_torchrun="not distributed; device 0 (cuda:0) hard-coded"),
    Example("ddp-tutorial multigpu (mp.spawn)", "ddp-tutorial-series", "multigpu.py", ("2", "1"), no_torchrun=SPAWNS),
    # the shipped config (gpt2_train_cfg.yaml) downloads its data and trains a 27M-parameter, 8-layer model for
    # 10 epochs at batch 216: with data, the bundled copy of the data, 0.2% of it, a 2-layer model of width 64,
    # batch 16, no loader workers, one epoch (eight overrides); as shipped, a shape run of one epoch
    Example("minGPT-ddp", "minGPT-ddp/mingpt", "main.py", (
        "data_config.path=data/input.txt", "data_config.truncate=0.002", "trainer_config.max_epochs=1",
        "trainer_config.batch_size=16", "trainer_config.data_loader_workers=0", "gpt_config.n_layer=2",
        "gpt_config.n_embd=64", "gpt_config.n_head=4"), no_torchrun=GPU_CHECK, needs=("hydra", "boto3")),
    Example("minGPT-ddp shipped config --shape-run", "minGPT-ddp/mingpt", "main.py", (
        "data_config.path=data/input.txt", "trainer_config.max_epochs=1"), no_torchrun=GPU_CHECK,
        needs=("hydra", "boto3"), shape_run=True),
    Example("tensor_parallel", "tensor_parallelism", "tensor_parallel_example.py", no_torchrun=GPU_CHECK),
    Example("sequence_parallel", "tensor_parallelism", "sequence_parallel_example.py", no_torchrun=GPU_CHECK),
    Example("fsdp_tp", "tensor_parallelism", "fsdp_tp_example.py", no_torchrun=GPU_CHECK),
    Example("FSDP2", "FSDP2", "example.py", no_torchrun=GPU_CHECK),
    Example("FSDP T5_training", "FSDP", "T5_training.py", skip="downloads its dataset (download_dataset.sh) "
            "and the t5 model from the Hugging Face hub"),
    Example("rpc ddp_rpc", "rpc/ddp_rpc", "main.py", no_torchrun=SPAWNS),
    Example("rpc rnn", "rpc/rnn", "main.py", no_torchrun=SPAWNS),
    Example("rpc pipeline", "rpc/pipeline", "main.py", no_torchrun=SPAWNS, needs=("torchvision",)),
    Example("rpc rl", "rpc/rl", "main.py", no_torchrun=SPAWNS, needs=("gymnasium",)),
    Example("rpc batch parameter_server", "rpc/batch", "parameter_server.py", no_torchrun=SPAWNS,
            needs=("torchvision",)),
    Example("rpc batch reinforce", "rpc/batch", "reinforce.py", no_torchrun=SPAWNS, needs=("gymnasium",)),
    Example("rpc parameter_server", "rpc/parameter_server", "rpc_parameter_server.py",
            skip="downloads MNIST (and is started once per rank by hand, with mp.Process)"),
    Example("ours: ddp_backend (gloo)", "", "ddp_backend.py", ("--backend", "gloo"),
            torchrun_args=("--backend", "gloo"), ours=True),
    Example("ours: ddp_backend (nccl)", "", "ddp_backend.py", ("--backend", "nccl"),
            torchrun_args=("--backend", "gloo"), ours=True),
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
    torchrun_s: float | None = None
    torchrun_exit: int | None = None
    ratio: float | None = None
    no_torchrun: str = ""


def folder_of(root: str, ex: Example) -> str:
    return os.path.join(OURS, ex.folder) if ex.ours else os.path.join(root, "distributed", ex.folder)


def check(pkb: str, root: str, ex: Example, nproc: int, timeout: float) -> Outcome:
    cmd = [pkb, "check", "--nproc-per-node", str(nproc), "--json", "--timeout", str(timeout),
           *(["--shape-run"] if ex.shape_run else []), ex.script, *ex.args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder_of(root, ex), capture_output=True, text=True, timeout=timeout + 120)
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


def torchrun(root: str, ex: Example, nproc: int, timeout: float) -> tuple[int | None, float]:
    """Exit code (None: stopped at the timeout) and wall time of the script under plain torchrun."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           ex.script, *ex.torchrun_args]
    t0 = time.perf_counter()
    try:
        rc = subprocess.run(cmd, cwd=folder_of(root, ex), capture_output=True, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = None
    return rc, time.perf_counter() - t0


def missing(ex: Example) -> list[str]:
    return [m for m in ex.needs if importlib.util.find_spec(m) is None]


def run_one(args, ex: Example, n: int) -> Outcome:
    if ex.skip:
        return Outcome(ex.name, n, "skipped", None, 0, None, ex.skip, no_torchrun=ex.skip)
    if missing(ex):
        why = f"needs {', '.join(missing(ex))}, not installed"
        return Outcome(ex.name, n, "skipped", None, 0, None, why, no_torchrun=why)
    o = check(args.pkb, args.examples_dir, ex, n, args.timeout)
    if ex.torchrun_args is None:
        o.no_torchrun = ex.no_torchrun
    elif not args.no_torchrun:
        rc, wall = torchrun(args.examples_dir, ex, n, args.timeout)
        o.torchrun_exit, o.torchrun_s = rc, round(wall, 2)
        o.ratio = round(o.wall_s / wall, 2) if rc == 0 else None
    return o


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("examples_dir", help="a checkout of pytorch/examples")
    ap.add_argument("--nproc", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these examples (names as in the table)")
    ap.add_argument("--no-torchrun", action="store_true", help="do not time the scripts under torchrun")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--markdown", metavar="OUT", help="the table in Markdown (docs/torch_examples.md)")
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
            if o.verdict == "skipped":
                real = ""
            elif o.torchrun_s is not None:
                real = f"torchrun {o.torchrun_s:6.1f} s (exit {o.torchrun_exit}) ratio {o.ratio}"
            else:
                real = f"torchrun: {o.no_torchrun or 'not timed'}"
            print(f"{o.example:34} {o.nproc:>2} {o.verdict:15} exit {o.exit_code!s:<4} ops {o.ops:>6} {wall}  "
                  f"{real}  {o.message}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows))


def short(message: str) -> str:
    """A finding's message for a table cell: without the rank, and a 'not simulated' one without its reason."""
    message = re.sub(r"^rank \d+: ", "", message)
    if message.startswith("not simulated: "):
        message = ": ".join(message.split(": ")[:2])
    return message


def markdown(rows: list[Outcome]) -> str:
    out = ["| script | nproc | pkb check verdict | ops | pkb wall s | torchrun wall s | ratio pkb/torchrun, or why "
           "torchrun cannot run it here |", "|---|---|---|---|---|---|---|"]
    for o in rows:
        verdict = o.verdict if not o.message or o.verdict == "ok" else f"{o.verdict}: {short(o.message)}"
        pkb_s = f"{o.wall_s:.1f}" if o.wall_s is not None else "-"
        real = f"{o.torchrun_s:.1f}" if o.torchrun_s is not None else "-"
        if o.ratio is not None:
            last = f"{o.ratio:.2f}"
        elif o.torchrun_s is not None:
            last = f"torchrun exit {o.torchrun_exit}"
        else:
            last = "" if o.verdict == "skipped" else o.no_torchrun
        out.append(f"| {o.example} | {o.nproc} | {verdict.replace('|', '/')} | {o.ops} | {pkb_s} | {real} | {last} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
