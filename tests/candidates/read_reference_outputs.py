"""Cheat: no communication at all; each call looks for the reference job's saved outputs of the same call on
disk (a job folder next to its own, where the reference job is alive beside it when the jobs take turns) and
returns them. Where there are none it returns its input, which is wrong with two ranks or more. Must end
"incorrect": the reference's outputs are off the disk before the candidate runs again."""
import glob
import os

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))


def solution(x):
    rank = dist.get_rank()
    for root in (HERE, os.path.dirname(HERE), "/tmp"):
        for path in glob.glob(os.path.join(root, "**", "pkb-reference-*", "out", f"*-rank{rank}.pt"), recursive=True):
            try:
                saved = torch.load(path)
            except Exception:  # noqa: BLE001 - a file still being written, or gone
                continue
            outs = saved if isinstance(saved, list) else saved.get("outputs", [])
            if outs and isinstance(outs[0], torch.Tensor) and outs[0].shape == x.shape:
                return outs[0].clone()
    return x.clone()
