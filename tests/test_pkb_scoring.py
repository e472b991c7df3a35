"""ParallelKernelBench problems scored by the real scorer (gloo on the CPU here; NCCL on GPUs): `pkb score
--pkb-root` and `pkb run --pkb-root --score`. Each rank loads the problem from the same small PKB-shaped
checkout, written here; outputs are compared as PKB compares them; what the reference itself does (change
its input in place) is no integrity finding against a candidate that does it too."""
import json
import pathlib
import textwrap

import pytest
from pkb_checkout import HEAD, write_checkout

from pkb.cli.main import main
from tasks.api import TaskContext
from tasks.parallelkernelbench.checkout import Inputs, load_specs
from tasks.parallelkernelbench.naming import Checkout

BUILDER = """
import torch


def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):
    torch.manual_seed(42 + problem_id * 1000 + rank + trial * 1_000_003)
    return (torch.randn(base_shape, dtype=dtype, device=device),)
"""

REFERENCES = {
    "1_sum_with_none": """
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return y, None
        """,
    "2_sum_in_place": """
        def solution(x):
            dist.all_reduce(x)
            return {"sum": x.clone(), "ranks": dist.get_world_size()}
        """,
}

@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> pathlib.Path:
    return write_checkout(tmp_path_factory.mktemp("pkb"), BUILDER, REFERENCES)


def write(folder: pathlib.Path, name: str, body: str) -> pathlib.Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def run_main(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def score(capsys, checkout, path, *extra) -> tuple[int, dict]:
    return run_main(capsys, ["score", str(path), "--pkb-root", str(checkout), "--backend", "gloo",
                             "--nproc-per-node", "2", "--timeout", "120", "--db", str(path.parent / "s.sqlite"),
                             "--json", *extra])


def test_the_scorers_seed_reaches_pkbs_builder_as_a_trial_no_harness_uses(checkout):
    spec = load_specs(Checkout(str(checkout), "float32"))[1]
    assert isinstance(spec.make_inputs, Inputs)

    def x(seed, trial):
        return spec.make_inputs(TaskContext(0, 2, seed, trial, "screen", {"m": 8, "n": 8}, None))[0]
    assert x(0, 1).equal(x(0, 1))
    assert not x(0, 0).equal(x(0, 1))        # seed 0: PKB's own trials
    assert not x(12345, 0).equal(x(0, 0))    # a secret seed: inputs of their own


@pytest.mark.slow
def test_a_wrong_sum_is_incorrect_and_its_fixed_twin_correct(capsys, checkout, tmp_path):
    wrong = write(tmp_path / "bug", "1_sum_with_none_cuda.py", """
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return y * 1.5, None
        """)
    code, res = score(capsys, checkout, wrong, "--correctness-only")
    assert (code, res["status"]) == (1, "incorrect"), res
    assert "pkb1_sum_with_none" == res["task"]
    fixed = write(tmp_path / "fix", "1_sum_with_none_cuda.py", """
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return y, None
        """)
    code, res = score(capsys, checkout, fixed, "--correctness-only")
    assert (code, res["status"], res["correct"], res["speedup"]) == (0, "correct", True, None), res


@pytest.mark.slow
def test_changing_the_input_is_a_finding_only_where_the_reference_does_not(capsys, checkout, tmp_path):
    # problem 1's reference leaves its input alone: a candidate that reduces in place breaks the rules
    in_place = write(tmp_path / "bug", "1_sum_with_none_cuda.py", """
        def solution(x):
            dist.all_reduce(x)
            return x.clone(), None
        """)
    code, res = score(capsys, checkout, in_place, "--correctness-only")
    assert res["status"] == "integrity", res
    assert any("modified its inputs" in f["message"] for f in res["findings"]), res["findings"]
    # problem 2's reference reduces in place itself: the same behaviour is allowed there
    same = write(tmp_path / "fix", "2_sum_in_place_cuda.py", """
        def solution(x):
            dist.all_reduce(x)
            return {"sum": x.clone(), "ranks": dist.get_world_size()}
        """)
    code, res = score(capsys, checkout, same, "--correctness-only")
    assert (code, res["status"]) == (0, "correct"), res


@pytest.mark.slow
def test_a_timed_score_of_a_pkb_problem_has_a_speedup_and_an_interval(capsys, checkout):
    code, res = score(capsys, checkout, checkout / "reference" / "1_sum_with_none.py",
                      "--launches", "2", "--batches", "2", "--calls", "2")
    assert code == 0 and res["status"] in ("faster", "slower"), res
    lo, hi = res["speedup_ci95"]
    assert lo <= res["speedup"] <= hi


@pytest.mark.slow
def test_pkb_run_screens_then_scores_a_pkb_tree(capsys, checkout, tmp_path):
    tree = tmp_path / "solutions_test_tree"
    write(tree, "1_sum_with_none_cuda.py", "def solution(x):\n    y = x.clone()\n    dist.all_reduce(y)\n"
                                           "    return y, None\n")
    write(tree, "2_sum_in_place_cuda.py", "def solution(x):\n    return {'sum': x * 2, 'ranks': 2}\n")
    code, out = run_main(capsys, ["run", str(tree), "--pkb-root", str(checkout), "--world-size", "2", "--score",
                                  "--correctness-only", "--db", str(tmp_path / "r.sqlite"), "--json",
                                  "--workers", "1"])
    verdicts = {pathlib.Path(r["candidate"]).name: r["verdict"] for r in out["results"]}
    assert verdicts == {"1_sum_with_none_cuda.py": "pass", "2_sum_in_place_cuda.py": "reject"}, out["results"]
    scored = {pathlib.Path(c).name: s["status"] for c, s in out["scores"].items()}
    assert scored == {"1_sum_with_none_cuda.py": "correct"}, out["scores"]
    # the leaderboard groups by tree and counts the screen's reject as a failure that never reached the GPU
    code, board = run_main(capsys, ["leaderboard", "--db", str(tmp_path / "r.sqlite"), "--json"])
    row, = board["rows"]
    assert row["correct_rate_parallelkernelbench"] == 0.5 and row["screen_rejected_parallelkernelbench"] == 1
    assert (row["label"], row["scored"], row["screen_rejected"], row["correct_rate"], row["fast_0"], row["fast_1"],
            row["untimed"]) == ("solutions_test_tree", 2, 1, 0.5, 0.5, 0.0, 1), row


def test_pkb_screen_runs_a_pkb_problem_at_world_size_1(capsys, checkout, tmp_path):
    code, res = run_main(capsys, ["screen", str(checkout / "reference" / "1_sum_with_none.py"), "--pkb-root",
                                  str(checkout), "--world-size", "1", "--no-cost", "--json", "--no-sandbox"])
    assert (code, res["verdict"], res["world_size"]) == (0, "pass", 1), res
