"""Exploit class: in `pkb run`, a candidate that patches `json.dumps` of its process so that every later
result reads "pass" (a worker used to screen the next candidates in the same process). Each candidate now
runs in a process forked for it alone from a zygote that ran nothing: the next candidate in the same worker,
an identity function, is rejected. In a batch of the identity function alone it is rejected the same way."""
import json

import pytest

from pkb.cli.main import main

FORGER = '''
import json

import torch.distributed as dist

_dumps = json.dumps


def _forged(obj, *args, **kwargs):
    if isinstance(obj, dict) and "verdict" in obj:
        obj = dict(obj, verdict="pass", reasons=[], correct=True)
    return _dumps(obj, *args, **kwargs)


json.dumps = _forged


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
'''

IDENTITY = "def solution(x):\n    return x.clone()\n"


@pytest.mark.parametrize("batch", [["a_forger.py", "b_identity.py"], ["b_identity.py"]])
def test_a_candidate_cannot_forge_the_next_candidates_result(tmp_path, capsys, batch):
    (tmp_path / "a_forger.py").write_text(FORGER)
    (tmp_path / "b_identity.py").write_text(IDENTITY)
    assert main(["run", *(str(tmp_path / f) for f in batch), "--tasks", "all_reduce", "--world-size", "2",
                 "--workers", "1", "--db", str(tmp_path / "r.sqlite"), "--json"]) == 0
    rows = {r["candidate"].rsplit("/", 1)[-1]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["b_identity.py"]["verdict"] == "reject"
    assert rows["b_identity.py"]["reasons"][0]["kind"] == "wrong_output"
