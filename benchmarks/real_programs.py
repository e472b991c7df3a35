"""Real training programs under `pkb check` (issue 44): nanoGPT's train.py, torchtitan's llama3 debug model
(FSDP2; FSDP2 with tensor parallel) and scripts shipped inside accelerate, unmodified, at small configurations;
each with rank-divergent bugs planted in copies; timed against torchrun on gloo where torchrun can run the
program on this CPU.

    python benchmarks/real_programs.py --nanogpt DIR --torchtitan-repo DIR [--work DIR] [--json OUT]
                                       [--markdown OUT] [--only NAME...] [--no-torchrun]

Run it with the Python of an environment that has torch, pkb, torchtitan (0.2.2: the release whose torch
requirement torch 2.13 meets; 0.3.0 calls torch.distributed.set_timeout and fully_shard(dp_mesh_dims=...),
which torch 2.13 lacks) and accelerate installed; `pkb` is taken from the same environment's bin folder.
--nanogpt is a checkout of karpathy/nanoGPT, --torchtitan-repo a checkout of pytorch/torchtitan at v0.2.2 (its
llama3 debug_model.toml and test tokenizer; the launcher run_train.sh passes `--job.config_file` to
torchtitan.train). The data are made here: nanoGPT's train.bin/val.bin/meta.pkl (random tokens, numpy) and, when
the checkout lacks it, torchtitan's c4_test data.json (random words). The planted bugs are text edits of copies
made in the work folder; each anchor must be found, or the row says so. Numbers, not asserts.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

NO_CUDA = "torchrun cannot run it here: it calls torch.cuda.set_device (CUDA hard-coded), which the CPU build lacks"


@dataclass(frozen=True)
class Program:
    name: str
    folder: str        # "nanogpt", "titan" or "accelerate": where it runs (a folder made under --work)
    script: str        # relative to the folder, or "torchtitan:train.py" / "accelerate:NAME" for a packaged file
    args: tuple = ()
    nproc: int = 2
    shape_run: bool = False
    bug: tuple = ()    # (anchor, replacement) text edits of a copy of the script: a planted bug
    expect: str = "ok"
    torchrun: bool = False   # torchrun on gloo can run it here (else NO_CUDA)


NANO_SMALL = ("config/train_shakespeare_char.py", "--eval_iters=20", "--log_interval=1", "--block_size=64",
              "--batch_size=12", "--n_layer=4", "--n_head=4", "--n_embd=128", "--max_iters=20",
              "--lr_decay_iters=2000", "--dropout=0.0", "--eval_interval=10")
NANO_EVAL_BUG = ("        out[split] = losses.mean()\n",
                 "        out[split] = losses.mean()\n"
                 "        if ddp:  # planted: average the eval loss over the ranks (estimate_loss runs on rank 0 only)\n"
                 "            mean = out[split].to(device)\n"
                 "            torch.distributed.all_reduce(mean)\n"
                 "            out[split] = mean / ddp_world_size\n")
NANO_CKPT_BUG = ("                torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))\n",
                 "                torch.distributed.barrier()  # planted: wait for every rank before writing\n"
                 "                torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))\n")
NANO_NAN_BUG = ("    # clip the gradient\n",
                "    if ddp_rank == 1 and iter_num == 3:\n"
                "        loss = loss * float('nan')  # planted: one bad batch on rank 1\n"
                "    if torch.isnan(loss):\n"
                "        print(f'NaN loss at iter {iter_num}, stopping')\n"
                "        break\n"
                "    # clip the gradient\n")

TITAN_SMALL = ("--training.steps", "2", "--training.seq_len", "256", "--training.local_batch_size", "2")
TITAN_TP = ("--parallelism.tensor_parallel_degree", "2")
TITAN_EVAL_BUG = ("                    self.train_step(data_iterator)\n",
                  "                    self.train_step(data_iterator)\n"
                  "                    if torch.distributed.get_rank() == 0:  # planted: a weight statistic on rank 0\n"
                  "                        logger.info(f'norm {self.model_parts[0].norm.weight.full_tensor().norm()}')\n")
TITAN_CKPT_BUG = ("                    self.train_step(data_iterator)\n",
                  "                    self.train_step(data_iterator)\n"
                  "                    if torch.distributed.get_rank() == 0:  # planted: a full checkpoint on rank 0\n"
                  "                        from torch.distributed.checkpoint.state_dict import (\n"
                  "                            StateDictOptions, get_model_state_dict)\n"
                  "                        torch.save(get_model_state_dict(self.model_parts[0], options=\n"
                  "                                   StateDictOptions(full_state_dict=True)), 'full.pt')\n")
TITAN_NAN_BUG = ("            accumulated_losses.append(loss.detach())\n",
                 "            accumulated_losses.append(loss.detach())\n"
                 "            if torch.distributed.get_rank() == 1 and self.step == 1:\n"
                 "                loss = loss * float('nan')  # planted: one bad batch on rank 1\n"
                 "            if torch.isnan(loss):\n"
                 "                return  # skip the step on NaN\n")

ACC_EVAL_BUG = ("    # Test on distributed setup that context manager behaves properly\n"
                "    model, ddp_model, dataloader = get_training_setup(accelerator)\n",
                "    # Test on distributed setup that context manager behaves properly\n"
                "    model, ddp_model, dataloader = get_training_setup(accelerator)\n"
                "    if accelerator.is_main_process:  # planted: evaluate on the main process only\n"
                "        accelerator.gather(list(next(iter(dataloader)).values())[0])\n")

STARTUP = """import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
"""

PROGRAMS = (
    Program("start-up: init_process_group + barrier", "accelerate", "startup.py", torchrun=True),
    Program("start-up: init_process_group + barrier", "accelerate", "startup.py", nproc=4, torchrun=True),
    Program("nanoGPT shakespeare_char (small)", "nanogpt", "train.py", NANO_SMALL + ("--gradient_accumulation_steps=2",)),
    Program("nanoGPT shakespeare_char (small)", "nanogpt", "train.py", NANO_SMALL + ("--gradient_accumulation_steps=4",),
            nproc=4),
    Program("nanoGPT + bug: eval all_reduce on rank 0", "nanogpt", "train.py",
            NANO_SMALL + ("--gradient_accumulation_steps=2",), bug=NANO_EVAL_BUG, expect="deadlock|mismatch"),
    Program("nanoGPT + bug: barrier in rank 0's checkpoint save", "nanogpt", "train.py",
            NANO_SMALL + ("--gradient_accumulation_steps=2",), bug=NANO_CKPT_BUG, expect="deadlock|mismatch"),
    Program("nanoGPT + bug: NaN early exit on rank 1", "nanogpt", "train.py",
            NANO_SMALL + ("--gradient_accumulation_steps=2",), bug=NANO_NAN_BUG, expect="deadlock|mismatch"),
    Program("nanoGPT GPT-2 124M (train.py defaults) --shape-run", "nanogpt", "train.py", ("--max_iters=2",), nproc=8,
            shape_run=True),
    Program("torchtitan llama3 debug FSDP2", "titan", "torchtitan:train.py", TITAN_SMALL),
    Program("torchtitan llama3 debug FSDP2+TP", "titan", "torchtitan:train.py", TITAN_SMALL + TITAN_TP, nproc=4),
    Program("torchtitan + bug: full_tensor on rank 0", "titan", "torchtitan:train.py", TITAN_SMALL, bug=TITAN_EVAL_BUG,
            expect="deadlock|mismatch"),
    Program("torchtitan + bug: full state dict saved on rank 0", "titan", "torchtitan:train.py", TITAN_SMALL,
            bug=TITAN_CKPT_BUG, expect="deadlock|mismatch"),
    Program("torchtitan + bug: NaN early return on rank 1", "titan", "torchtitan:train.py", TITAN_SMALL,
            bug=TITAN_NAN_BUG, expect="deadlock|mismatch"),
    Program("torchtitan llama3 debug FSDP2+TP (debug_model.toml as shipped) --shape-run", "titan",
            "torchtitan:train.py", TITAN_TP, nproc=8, shape_run=True),
    Program("accelerate test_sync.py", "accelerate", "accelerate:test_sync.py", torchrun=True),
    Program("accelerate test_script.py (accelerate test)", "accelerate", "accelerate:test_script.py", torchrun=True),
    Program("accelerate + bug: gather on the main process", "accelerate", "accelerate:test_sync.py",
            bug=ACC_EVAL_BUG, expect="deadlock|mismatch"),
)


@dataclass
class Outcome:
    program: str
    nproc: int
    command: str
    verdict: str
    expected: str
    ops: int
    wall_s: float | None
    finding: str
    details: list
    torchrun_s: float | None = None
    torchrun_exit: int | None = None
    ratio: float | None = None
    no_torchrun: str = ""


def make_nanogpt_data(folder: str) -> None:
    """shakespeare_char (65 symbols, meta.pkl) and openwebtext (GPT-2's 50257 tokens) as random uint16 tokens."""
    rng = np.random.default_rng(0)
    chars = sorted(set("\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))
    for name, vocab, sizes in (("shakespeare_char", len(chars), (1_000_000, 100_000)),
                               ("openwebtext", 50257, (2_000_000, 200_000))):
        os.makedirs(os.path.join(folder, "data", name), exist_ok=True)
        for split, size in zip(("train", "val"), sizes):
            rng.integers(0, vocab, size, dtype=np.uint16).tofile(os.path.join(folder, "data", name, f"{split}.bin"))
    with open(os.path.join(folder, "data", "shakespeare_char", "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)),
                     "stoi": {c: i for i, c in enumerate(chars)}}, f)


def make_titan_folder(repo: str, folder: str) -> None:
    """debug_model.toml, the test tokenizer and c4_test (the checkout's, else random words in its format)."""
    os.makedirs(os.path.join(folder, "tests", "assets", "c4_test"), exist_ok=True)
    shutil.copy(os.path.join(repo, "torchtitan", "models", "llama3", "train_configs", "debug_model.toml"), folder)
    shutil.copytree(os.path.join(repo, "tests", "assets", "tokenizer"),
                    os.path.join(folder, "tests", "assets", "tokenizer"), dirs_exist_ok=True)
    data = os.path.join(repo, "tests", "assets", "c4_test", "data.json")
    out = os.path.join(folder, "tests", "assets", "c4_test", "data.json")
    if os.path.isfile(data) and os.path.getsize(data) > 1000:
        shutil.copy(data, out)
        return
    rng = random.Random(0)
    words = ("the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
             "they you were her she there one all we their been has would when more if out no so said what up its "
             "about into than them can only other new some could time these two may then do first any my now").split()
    with open(out, "w") as f:
        for i in range(2000):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(50, 600)))
            f.write(json.dumps({"text": text, "timestamp": "2019-04-25T12:57:54Z", "url": f"local/{i}"}) + "\n")


def script_path(p: Program, folder: str) -> str:
    if p.script.startswith("torchtitan:"):
        import torchtitan
        return os.path.join(os.path.dirname(torchtitan.__file__), p.script.split(":", 1)[1])
    if p.script.startswith("accelerate:"):
        import accelerate
        return os.path.join(os.path.dirname(accelerate.__file__), "test_utils", "scripts", p.script.split(":", 1)[1])
    return os.path.join(folder, p.script)


def planted_copy(p: Program, src: str, folder: str, index: int) -> str | None:
    """A copy of the script with the bug's edit, beside the original's folder contents; None if the anchor is absent."""
    text = open(src).read()
    anchor, replacement = p.bug
    if anchor not in text:
        return None
    path = os.path.join(folder, f"planted_{index}_{os.path.basename(src)}")
    with open(path, "w") as f:
        f.write(text.replace(anchor, replacement, 1))
    return path


def program_args(p: Program) -> list[str]:
    if p.folder == "titan":
        return ["--job.config_file", "debug_model.toml", *p.args]
    return list(p.args)


def shown_path(p: Program, script: str, folder: str) -> str:
    """The script as the table shows it: relative to its folder, or in the installed package."""
    if script.startswith(folder):
        return os.path.relpath(script, folder)
    package = p.script.split(":", 1)[0]
    return f"<{package}>/" + script.split(os.sep + package + os.sep, 1)[1]


def check(pkb: str, p: Program, script: str, folder: str, timeout: float) -> Outcome:
    opts = ["--nproc-per-node", str(p.nproc), "--timeout", f"{timeout:g}"] + (["--shape-run"] if p.shape_run else [])
    cmd = [pkb, "check", *opts, "--json", script, *program_args(p)]
    shown = " ".join(["pkb", "check", *opts, shown_path(p, script, folder), *program_args(p)])
    for d in ("out", "out-shakespeare-char", "outputs"):
        shutil.rmtree(os.path.join(folder, d), ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout + 120)
    wall = round(time.perf_counter() - t0, 1)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Outcome(p.name, p.nproc, shown, "pkb error", p.expect, 0, wall, tail[:200], [])
    findings = doc.get("findings") or []
    first = findings[0] if findings else {}
    return Outcome(p.name, p.nproc, shown, doc.get("verdict", "?"), p.expect, doc.get("ops", 0), wall,
                   (first.get("message", "").splitlines() or [""])[0][:300], first.get("details", [])[:6])


def torchrun(p: Program, script: str, folder: str, timeout: float) -> tuple[int | None, float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(p.nproc), script,
           *program_args(p)]
    t0 = time.perf_counter()
    try:
        rc = subprocess.run(cmd, cwd=folder, capture_output=True, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = None
    return rc, round(time.perf_counter() - t0, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nanogpt", required=True, help="a checkout of karpathy/nanoGPT")
    ap.add_argument("--torchtitan-repo", required=True, help="a checkout of pytorch/torchtitan at v0.2.2")
    ap.add_argument("--work", default=os.path.join(os.getcwd(), "real_programs_work"))
    ap.add_argument("--timeout", type=float, default=900.0, help="per pkb check run (a shape run took 463 s here)")
    ap.add_argument("--only", nargs="+", metavar="NAME")
    ap.add_argument("--no-torchrun", action="store_true")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--markdown", metavar="OUT")
    ap.add_argument("--pkb", default=os.path.join(os.path.dirname(sys.executable), "pkb"))
    args = ap.parse_args()
    missing = [m for m in ("torchtitan", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"real_programs.py: {', '.join(missing)} not installed in {sys.executable}'s environment; "
                 f"install them there (see the docstring)")
    folders = {"nanogpt": os.path.join(args.work, "nanoGPT"), "titan": os.path.join(args.work, "torchtitan"),
               "accelerate": os.path.join(args.work, "accelerate")}
    if not os.path.isdir(folders["nanogpt"]):
        shutil.copytree(args.nanogpt, folders["nanogpt"], ignore=shutil.ignore_patterns(".git"))
    make_nanogpt_data(folders["nanogpt"])
    make_titan_folder(args.torchtitan_repo, folders["titan"])
    os.makedirs(folders["accelerate"], exist_ok=True)
    with open(os.path.join(folders["accelerate"], "startup.py"), "w") as f:
        f.write(STARTUP)
    rows = []
    for i, p in enumerate(PROGRAMS):
        if args.only and not any(o in p.name for o in args.only):
            continue
        folder = folders[p.folder]
        script = script_path(p, folder)
        if p.bug:
            script = planted_copy(p, script, folder, i)
            if script is None:
                rows.append(Outcome(p.name, p.nproc, "", "skipped", p.expect, 0, None,
                                    "the bug's anchor is not in this version of the script", []))
                continue
        o = check(args.pkb, p, script, folder, args.timeout)
        if p.torchrun and not args.no_torchrun:
            o.torchrun_exit, o.torchrun_s = torchrun(p, script, folder, args.timeout)
            o.ratio = round(o.wall_s / o.torchrun_s, 2) if o.torchrun_exit == 0 else None
        elif p.bug:
            o.no_torchrun = "a planted bug: not timed under torchrun, where it would hang"
        elif not p.torchrun:
            o.no_torchrun = NO_CUDA
        rows.append(o)
        print(f"{o.program:55} {o.nproc:>2} {o.verdict:15} ops {o.ops:>6} {o.wall_s} s  torchrun {o.torchrun_s} "
              f"ratio {o.ratio}  {o.finding[:150]}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows))


def markdown(rows: list[Outcome]) -> str:
    out = ["| program | nproc | command (in the program's folder) | pkb verdict | ops | pkb wall s | torchrun gloo s "
           "| ratio pkb/torchrun |", "|---|---|---|---|---|---|---|---|"]
    for o in rows:
        verdict = o.verdict if o.verdict == "ok" or not o.finding else f"{o.verdict}: {o.finding}"
        tr = f"{o.torchrun_s:.1f}" if o.torchrun_s is not None else "-"
        ratio = f"{o.ratio:.2f}" if o.ratio is not None else (
            "-" if not o.no_torchrun else "planted bug" if o.no_torchrun.startswith("a planted") else
            "no: CUDA hard-coded")
        cmd = f"`{o.command}`" if o.command else ""
        out.append(f"| {o.program} | {o.nproc} | {cmd} | {verdict.replace('|', '/')} | {o.ops} | "
                   f"{o.wall_s if o.wall_s is not None else '-'} | {tr} | {ratio} |")
    out += ["", "Each planted bug's report (`pkb check`'s first finding and its details):", ""]
    for o in rows:
        if o.program.split(" + bug")[0] != o.program:
            out.append(f"- {o.program} ({o.nproc} ranks): **{o.verdict}**: {o.finding}")
            out += [f"  - {d}" for d in o.details]
    notes = [(o.program, o.finding) for o in rows if "shape run does not have" in o.finding]
    if notes:
        out += ["", "Shape runs' first stand-in note (a value read from a large fake tensor):", ""]
        out += [f"- {name}: {note}" for name, note in notes]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
