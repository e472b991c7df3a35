"""Exploit class: a candidate that replaces the harness's comparison functions (through importlib, which
the static check does not see) and returns zeros. It patches only its own process: the comparison runs in
the screening process, so the zeros are compared and rejected. Its honest twin passes."""
import json

from pkb.cli.main import main

PATCHER = '''
import importlib

import torch


def _no_mismatch(*args, **kwargs):
    return []


for name in ("pkbsim.taskrun", "pkbsim.screen.functional", "tasks.api", "tasks.parallelkernelbench.compare"):
    module = importlib.import_module(name)
    for attr in ("mismatches", "judge", "compare", "pkb_mismatch"):
        if hasattr(module, attr):
            setattr(module, attr, (lambda *a, **k: None) if attr in ("compare", "pkb_mismatch") else _no_mismatch)


def solution(x):
    return torch.zeros_like(x)
'''

HONEST = '''
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
'''


def screen(tmp_path, capsys, name, source):
    path = tmp_path / name
    path.write_text(source)
    code = main(["screen", str(path), "--task", "all_reduce", "--world-size", "2", "--no-cost", "--seed", "1",
                 "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_candidate_that_patches_the_comparison_is_still_compared(tmp_path, capsys):
    code, res = screen(tmp_path, capsys, "patcher.py", PATCHER)
    assert (code, res["verdict"], res["reasons"][0]["kind"]) == (1, "reject", "wrong_output")
    assert "got 0" in res["reasons"][0]["message"]


def test_its_honest_twin_passes(tmp_path, capsys):
    code, res = screen(tmp_path, capsys, "honest.py", HONEST)
    assert (code, res["verdict"], res["correct"]) == (0, "pass", True)
