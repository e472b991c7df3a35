"""Each library's front door (pkbsim/__init__.py, hwbackend/__init__.py): every name it exports resolves, none
is hidden by a submodule of the same name, and the shell asks for no name it does not export (the layering
test checks that the shell reaches no module behind it). What the doors buy, checked in fresh processes:
`pkb --help` loads no torch (it took 9-12 s on a loaded 2-core machine, 1.0-1.6 s after, issue 43), and
`pkb score` loads no part of the simulator, ParallelKernelBench checkouts included (it named its task
through pkbsim's screen). Each probe has its twin: a planted import of what it looks for is seen."""
import ast
import json
import os
import pkgutil
import subprocess
import sys

import pytest

import hwbackend
import pkbsim
from pkb_checkout import write_checkout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARIES = (pkbsim, hwbackend)


@pytest.mark.parametrize("lib", LIBRARIES, ids=lambda m: m.__name__)
def test_every_exported_name_resolves_and_no_submodule_hides_one(lib):
    assert lib.__all__ == sorted(set(lib.__all__))
    assert all(getattr(lib, name) is not None for name in lib.__all__)
    submodules = {m.name for m in pkgutil.iter_modules(lib.__path__)}
    assert submodules & set(lib.__all__) == set()  # `from pkbsim import screen` would give the package
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        lib.no_such_name  # noqa: B018


def _names_the_shell_asks_for() -> dict[str, set[str]]:
    asked: dict[str, set[str]] = {lib.__name__: set() for lib in LIBRARIES}
    for folder, _, files in os.walk(os.path.join(ROOT, "pkb")):
        for f in (f for f in files if f.endswith(".py")):
            with open(os.path.join(folder, f)) as fh:
                tree = ast.parse(fh.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in asked:
                    asked[node.module] |= {a.name for a in node.names}
    return asked


def test_the_shell_asks_each_front_door_only_for_names_it_exports():
    asked = _names_the_shell_asks_for()
    assert asked["pkbsim"] and asked["hwbackend"]
    assert {lib: names - set(sys.modules[lib].__all__) for lib, names in asked.items()} == {
        "pkbsim": set(), "hwbackend": set()}


def _loaded(code: str, *args: str) -> dict:
    """The modules of ours and torch a fresh process has loaded after `code` (which prints them itself
    where it ends early)."""
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, env=dict(os.environ, PKB_NO_SANDBOX="1"))
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("LOADED ")]
    assert line, out.stdout + out.stderr
    return json.loads(line[-1][len("LOADED "):])


REPORT = ("import json, sys\n"
          "def report():\n"
          "    print('LOADED ' + json.dumps({'pkbsim': sorted(m for m in sys.modules if m.split('.')[0] == 'pkbsim'),"
          " 'torch': 'torch' in sys.modules}), flush=True)\n")
HELP = REPORT + ("for m in sys.argv[1:]:\n    __import__(m)\n"
                 "from pkb.cli.main import build_parser\nbuild_parser().format_help()\nreport()\n")


def test_pkb_help_loads_no_torch():
    assert _loaded(HELP)["torch"] is False


def test_twin_a_planted_torch_import_is_seen():
    assert _loaded(HELP, "tasks.registry")["torch"] is True


# `pkb score` up to the moment it would start scoring: the scorer stands in, reports and exits
SCORE = REPORT + ("import hwbackend.score\n"
                  "def scored(request, protocol, options):\n    report()\n    sys.exit(0)\n"
                  "hwbackend.score.score = scored\n"
                  "plant = sys.argv.index('--plant') if '--plant' in sys.argv else None\n"
                  "if plant:\n    __import__(sys.argv.pop(plant + 1)); sys.argv.pop(plant)\n"
                  "from pkb.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")
GLOO = ["--backend", "gloo", "--nproc-per-node", "2", "--no-sandbox"]


def test_pkb_score_loads_no_part_of_the_simulator():
    cand = os.path.join(ROOT, "tasks", "solutions", "all_reduce.py")
    assert _loaded(SCORE, "score", cand, "--task", "all_reduce", *GLOO)["pkbsim"] == []


def test_pkb_score_names_a_parallelkernelbench_problem_without_the_simulator(tmp_path):
    (tmp_path / "pkb").mkdir()
    root = write_checkout(tmp_path / "pkb", "import torch\n"
                          "def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial, device):\n"
                          "    g = torch.Generator().manual_seed(problem_id * 1000 + rank * 10 + trial)\n"
                          "    return torch.randn(*base_shape, generator=g).to(dtype)\n",
                          {"1_sum": "def solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n    return y\n"})
    cand = tmp_path / "solutions" / "1_sum_cuda.py"
    cand.parent.mkdir()
    cand.write_text("import torch.distributed as dist\n\ndef solution(x):\n    y = x.clone()\n"
                    "    dist.all_reduce(y)\n    return y\n")
    assert _loaded(SCORE, "score", str(cand), "--pkb-root", str(root), *GLOO)["pkbsim"] == []


def test_twin_a_planted_simulator_import_in_pkb_score_is_seen():
    cand = os.path.join(ROOT, "tasks", "solutions", "all_reduce.py")
    loaded = _loaded(SCORE, "--plant", "pkbsim.screen.result", "score", cand, "--task", "all_reduce", *GLOO)
    assert "pkbsim.screen.result" in loaded["pkbsim"]
