import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

import pkbsim.plugins  # noqa: F401 - the world's plug-ins for every test, as `pkb check` registers them
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

HERE = os.path.dirname(os.path.abspath(__file__))


def in_fresh_interpreter(driver: str, program: str) -> dict:
    """Run `driver` (Python source) in a new interpreter with `program` (dedented) as its argument, from the
    repository root; the JSON document its last line prints. For what one process's imports must not decide."""
    root = os.path.dirname(HERE)
    proc = subprocess.run([sys.executable, "-c", driver, textwrap.dedent(program)], cwd=root, capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, PYTHONPATH=root))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_program(name: str, mode: str, nproc: int = 2):
    """`pkb check` of tests/programs/NAME MODE on `nproc` simulated ranks: the result, the program's output.
    One program serves several tests by its mode (an inline-CUDA one is built once)."""
    out = io.StringIO()
    res = check_script(os.path.join(HERE, "programs", name), [mode], RunOptions(nproc=nproc, timeout=600, output=out))
    return res, out.getvalue()

PRELUDE = """\
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
rank, world = dist.get_rank(), dist.get_world_size()
"""


@pytest.fixture
def run_program(tmp_path):
    """Run a program body (after a torchrun prelude) on N simulated ranks; returns the RunResult."""
    def run(body: str, nproc: int = 2, prelude: bool = True, **opts):
        src = (PRELUDE if prelude else "") + textwrap.dedent(body)
        path = tmp_path / "prog.py"
        path.write_text(src)
        out = io.StringIO()
        res = check_script(str(path), opts.pop("argv", []), RunOptions(nproc=nproc, output=out, **opts))
        res.output = out.getvalue()
        return res
    return run


def score_candidate(name: str, **protocol):
    """`pkb score` of tests/candidates/<name>.py for all_reduce on gloo at 2 ranks (one launch, one batch of
    two calls, 60 s unless `protocol` says otherwise)."""
    from hwbackend.score import Protocol, ScoreRequest, score
    settings = dict(launches=1, batches=1, calls=2, timeout=60) | protocol
    return score(ScoreRequest("all_reduce", os.path.join(HERE, "candidates", f"{name}.py"), 2, "gloo"),
                 Protocol(**settings))


def screen_json(capsys, path, *extra):
    """(exit code, JSON verdict) of `pkb screen` on `path` for all_reduce at 2 ranks, functional stage only."""
    import json

    from pkb.cli.main import main
    code = main(["screen", str(path), "--task", "all_reduce", "--world-size", "2", "--no-cost", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)
