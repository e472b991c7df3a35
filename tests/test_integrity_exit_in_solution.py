"""Exploit class: a candidate that ends its process inside `solution` (`os._exit(0)`), which used to make
`pkb screen --json` exit 0 with nothing printed. Its process is not the screen's: the screen prints a JSON
reject "crash" naming the file and exits 1. A candidate that is killed by a signal is not blamed (pkb
cannot tell whose fault a signal is): inconclusive, exit 3. The honest twin passes with exit 0."""
import json

import pytest

from pkb.cli.main import main

BODIES = {
    "exit": "import os\n\n\ndef solution(x):\n    os._exit(0)\n",
    "signal": "import os\nimport signal\n\n\ndef solution(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    "honest": "import torch.distributed as dist\n\n\ndef solution(x):\n    out = x.clone()\n"
              "    dist.all_reduce(out)\n    return out\n",
}


@pytest.mark.parametrize("name, code, verdict, kind", [("exit", 1, "reject", "crash"),
                                                       ("signal", 3, "inconclusive", "worker_crash"),
                                                       ("honest", 0, "pass", None)])
def test_the_screen_reports_a_candidate_that_ends_its_process(tmp_path, capsys, name, code, verdict, kind):
    path = tmp_path / f"{name}.py"
    path.write_text(BODIES[name])
    got = main(["screen", str(path), "--task", "all_reduce", "--world-size", "2", "--no-cost", "--json"])
    res = json.loads(capsys.readouterr().out)
    assert (got, res["verdict"]) == (code, verdict)
    if kind:
        assert res["reasons"][0]["kind"] == kind
    if kind == "crash":
        assert "exited with status 0" in res["reasons"][0]["message"] and res["reasons"][0]["site"] == str(path)
    if kind == "worker_crash":
        assert "SIGKILL" in res["reasons"][0]["message"]
