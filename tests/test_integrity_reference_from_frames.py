"""Exploit class: a candidate that does no communication and returns the reference's output for its trial,
found by walking up the stack to the harness's frame. The reference runs in the screening process, not in
the candidate's: the walk finds nothing, the candidate returns its own input, and is rejected. Its honest
twin, which communicates, passes."""
import json

from pkb.cli.main import main

THIEF = '''
import sys

import torch.distributed as dist


def solution(x):
    rank = dist.get_rank()
    frame = sys._getframe(1)
    while frame is not None:
        loc = frame.f_locals
        results, calls, current = loc.get("results"), loc.get("calls"), loc.get("c")
        if isinstance(results, list) and isinstance(calls, list) and current is not None:
            for result, call in zip(results, calls):
                outs = getattr(result, "outputs", None)
                if getattr(call, "load", 1) is None and call.trial == current.trial and outs and outs[rank]:
                    return outs[rank][0].clone()
        frame = frame.f_back
    return x.clone()
'''

HONEST = '''
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
'''


def screen(tmp_path, capsys, source):
    path = tmp_path / "candidate.py"
    path.write_text(source)
    code = main(["screen", str(path), "--task", "all_reduce", "--world-size", "2", "--no-cost", "--seed", "2",
                 "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_reference_outputs_are_not_in_the_candidates_process(tmp_path, capsys):
    code, res = screen(tmp_path, capsys, THIEF)
    assert (code, res["verdict"], res["reasons"][0]["kind"]) == (1, "reject", "wrong_output")


def test_its_honest_twin_passes(tmp_path, capsys):
    code, res = screen(tmp_path, capsys, HONEST)
    assert (code, res["verdict"]) == (0, "pass")
