"""An sbatch script that scores a batch of candidates across one Slurm allocation.

One job step per candidate, one after the other: each step runs `pkb score` once on every node of the
allocation (`--node-rank` from Slurm's node id, rendezvous on the allocation's first node), so the
step's node 0 scores and writes the one results store; `--resume` makes a resubmitted script skip
candidates already scored. A step that ends in anything but faster/slower (pkb score's exit code) is
counted and the next one runs.
"""
from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

from hwbackend import defaults


class SlurmError(Exception):
    """sbatch is missing or refused the script; the message says what to do."""


@dataclass
class SlurmPlan:
    task: str
    candidates: list[str]          # absolute paths, visible from every node
    nodes: int
    gpus_per_node: int
    db: str                        # absolute path on a filesystem every node shares
    backend: str = "nccl"
    preset: str | None = None
    timeout: float = defaults.JOB_TIMEOUT_S
    port: int = defaults.SLURM_PORT
    label: str | None = None
    time_limit: str | None = None
    partition: str | None = None
    account: str | None = None
    job_name: str = defaults.SLURM_JOB_NAME
    score_args: list[str] = field(default_factory=list)  # passed through to every `pkb score`
    pkb: list[str] = field(default_factory=lambda: ["pkb"])  # the command that runs pkb on each node


def _directives(plan: SlurmPlan) -> list[str]:
    lines = [f"--job-name={plan.job_name}", f"--nodes={plan.nodes}", "--ntasks-per-node=1",
             f"--gpus-per-node={plan.gpus_per_node}", "--exclusive", "--output=pkb-%j.out"]
    for flag, value in (("time", plan.time_limit), ("partition", plan.partition), ("account", plan.account)):
        if value:
            lines.append(f"--{flag}={value}")
    return [f"#SBATCH {shlex.quote(d)}" for d in lines]


def _score_args(plan: SlurmPlan) -> list[str]:
    args = ["--task", plan.task, "--backend", plan.backend, "--nproc-per-node", str(plan.gpus_per_node),
            "--timeout", f"{plan.timeout:g}", "--db", plan.db, "--resume"]
    if plan.preset:
        args += ["--preset", plan.preset]
    if plan.label:
        args += ["--label", plan.label]
    return args + plan.score_args


def sbatch_script(plan: SlurmPlan) -> str:
    """The script's text. Node-local values ($SLURM_NODEID) are expanded on each node, by the inner
    shell of its step; everything else is fixed (and quoted) here."""
    pkb = [*plan.pkb, "score"]
    per_node = 'exec "$@" --node-rank "$SLURM_NODEID"'
    lines = ["#!/bin/bash", *_directives(plan),
             f"# written by `pkb slurm`: {len(plan.candidates)} candidate(s) for task {plan.task}, one job step each,",
             f"# {plan.nodes} node(s) x {plan.gpus_per_node} GPU(s) per step; results in {plan.db}",
             "set -u",
             'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
             "unscored=0"]
    srun = f"srun --nodes={plan.nodes} --ntasks={plan.nodes} --ntasks-per-node=1"
    for i, cand in enumerate(plan.candidates):
        cmd = shlex.join([*pkb, cand, *_score_args(plan)])
        if plan.nodes > 1:  # the same command on every node, each with its own node rank
            cmd = (f"bash -c {shlex.quote(per_node)} pkb-node {cmd} --nnodes {plan.nodes} "
                   f"--rdzv-endpoint \"$head_node:{plan.port + i}\"")
        report = f'echo "pkb slurm: step {i + 1}: pkb score exited with status $?"'
        lines += [f"echo {shlex.quote(f'pkb slurm: step {i + 1}/{len(plan.candidates)}: {cand}')}",
                  f"{srun} {cmd} || {{ {report}; unscored=$((unscored + 1)); }}"]
    summary = f'echo "pkb slurm: $unscored step(s) did not end faster or slower; results in" {shlex.quote(plan.db)}'
    lines += [summary, "exit $((unscored > 0))", ""]
    return "\n".join(lines)


def submit(script_path: str) -> str:
    """sbatch the script; returns sbatch's answer (the job id)."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise SlurmError(f"sbatch not found: this machine has no Slurm; the script is at {script_path}: run "
                         f"`sbatch {script_path}` on the cluster's login node")
    proc = subprocess.run([sbatch, script_path], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        said = ((proc.stderr or proc.stdout).strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise SlurmError(f"sbatch refused the script: {said}")
    return proc.stdout.strip()
