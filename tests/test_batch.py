"""`pkb run` and `pkb report`: batch screening in worker processes, resuming from the store, limits,
ParallelKernelBench checkouts, the Ray executor and the HTML report in a real browser."""
import json
import os
import pathlib
import shutil
import subprocess
import textwrap

import pytest

from pkb.cli.main import main

BROKEN = pathlib.Path(__file__).parent / "broken_candidates"


def run_json(capsys, *argv) -> dict:
    assert main(["run", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def batch(tmp_path):
    """Three labelled candidates for all_reduce, copied so each test has its own files."""
    folder = tmp_path / "cands"
    folder.mkdir()
    for name in ("all_reduce__reference.py", "all_reduce__wrong_output.py", "all_reduce__deadlock.py"):
        shutil.copy(BROKEN / name, folder / name)
    return folder


def test_run_screens_a_folder_resumes_from_the_store_and_reports(batch, tmp_path, capsys):
    db = str(tmp_path / "r.sqlite")
    first = run_json(capsys, str(batch), "--world-size", "2", "--db", db, "--seed", "3")
    verdicts = {os.path.basename(r["candidate"]): (r["verdict"], r["stage"]) for r in first["results"]}
    assert verdicts == {"all_reduce__reference.py": ("pass", "cost"),
                        "all_reduce__wrong_output.py": ("reject", "functional"),
                        "all_reduce__deadlock.py": ("reject", "functional")}
    from pkbsim.screen.result import ScreenResult
    for r in first["results"]:  # typed between the worker's pipe, the store and the output: nothing lost or added
        assert ScreenResult.from_json(r).to_json() == r
    # a second run reuses every stored row (same timings), except for a file that changed
    (batch / "all_reduce__deadlock.py").write_text((BROKEN / "all_reduce__reference.py").read_text())
    again = run_json(capsys, str(batch), "--world-size", "2", "--db", db, "--seed", "3")
    old = {r["candidate"]: r["seconds"] for r in first["results"]}
    new = {r["candidate"]: r for r in again["results"]}
    assert new[str(batch / "all_reduce__wrong_output.py")]["seconds"] == old[str(batch / "all_reduce__wrong_output.py")]
    assert new[str(batch / "all_reduce__deadlock.py")]["verdict"] == "pass"
    check_report(db, tmp_path, capsys)


def test_run_kills_a_candidate_over_its_time_limit(tmp_path, capsys):
    f = tmp_path / "all_reduce__spins.py"
    f.write_text("import time\nwhile True:\n    time.sleep(0.01)\ndef solution(x):\n    return x\n")
    out = run_json(capsys, str(f), "--world-size", "2", "--db", str(tmp_path / "r.sqlite"), "--time-limit", "20")
    (res,) = out["results"]
    # the pool's limit is pkb's: the world's own --timeout tells a hang of the candidate (test_verdicts.py)
    assert (res["verdict"], res["stage"], res["reasons"][0]["kind"]) == ("inconclusive", "time_limit", "time_limit")
    leftovers = subprocess.run(["pgrep", "-f", "pkb.batch.worker"], capture_output=True, text=True, check=False).stdout.split()
    assert str(os.getpid()) not in leftovers and not [p for p in leftovers if _child_of_us(p)]


def _child_of_us(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().split(")")[1].split()[1]) == os.getpid()
    except OSError:
        return False


def test_files_that_name_no_task_are_skipped_with_a_reason(tmp_path, capsys):
    f = tmp_path / "mystery.py"
    f.write_text("def solution(x):\n    return x\n")
    assert main(["run", str(f), "--db", str(tmp_path / "r.sqlite"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results"] == [] and "names no task" in out["skipped"][0]
    assert main(["run", str(tmp_path / "nope"), "--db", str(tmp_path / "r.sqlite")]) == 2


def fake_pkb_checkout(root: pathlib.Path) -> pathlib.Path:
    (root / "reference").mkdir(parents=True)
    (root / "utils").mkdir()
    (root / "reference" / "1_all_reduce.py").write_text(textwrap.dedent("""
        import torch.distributed as dist
        def solution(x):
            y = x.clone()
            dist.all_reduce(y)
            return y
        """))
    (root / "utils" / "input_output_tensors.py").write_text(textwrap.dedent("""
        import torch
        def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial, device):
            g = torch.Generator().manual_seed(42 + problem_id * 1000 + rank + trial * 1_000_003)
            return (torch.randn(*base_shape, generator=g, dtype=dtype).to(device),)
        """))
    sols = root / "solutions_cuda"
    sols.mkdir()
    (sols / "1_all_reduce_cuda.py").write_text((root / "reference" / "1_all_reduce.py").read_text())
    (sols / "1_all_reduce_wrong_cuda.py").write_text("import torch\ndef solution(x):\n    return x.clone()\n")
    return sols


def test_parallelkernelbench_checkout_problems_become_tasks(tmp_path, capsys):
    sols = fake_pkb_checkout(tmp_path / "pkb")
    out = run_json(capsys, str(sols), "--pkb-root", str(tmp_path / "pkb"), "--world-size", "2",
                   "--db", str(tmp_path / "r.sqlite"), "--seed", "1")
    got = {os.path.basename(r["candidate"]): (r["task"], r["verdict"]) for r in out["results"]}
    assert got == {"1_all_reduce_cuda.py": ("pkb1_all_reduce", "pass"),
                   "1_all_reduce_wrong_cuda.py": ("pkb1_all_reduce", "reject")}
    assert main(["run", str(sols), "--pkb-root", str(tmp_path), "--db", str(tmp_path / "r.sqlite")]) == 2



def test_pkb_run_feeds_the_dtype_it_is_given_and_keeps_each_dtypes_result(tmp_path, capsys):
    sols = fake_pkb_checkout(tmp_path / "pkb")
    only_bf16 = sols / "1_all_reduce_bf16_cuda.py"
    only_bf16.write_text("import torch, torch.distributed as dist\ndef solution(x):\n"
                         "    assert x.dtype == torch.bfloat16, 'a bf16-only kernel'\n"
                         "    y = x.clone()\n    dist.all_reduce(y)\n    return y\n")
    common = [str(only_bf16), "--pkb-root", str(tmp_path / "pkb"), "--world-size", "2",
              "--db", str(tmp_path / "r.sqlite"), "--seed", "1"]
    assert [r["verdict"] for r in run_json(capsys, *common)["results"]] == ["pass"]
    assert [r["verdict"] for r in run_json(capsys, *common, "--pkb-dtype", "float32")["results"]] == ["reject"]


def test_defaults_are_named_once():
    """A score's preset follows its backend (hwbackend/job_spec.py names it once)."""
    from hwbackend.job_spec import default_preset

    assert (default_preset("nccl"), default_preset("gloo")) == ("full", "screen")

def check_report(db: str, tmp_path, capsys) -> None:
    """The report's table, its JSON, one timeline, and the HTML page rendered by headless Chromium."""
    html = tmp_path / "report.html"
    assert main(["report", "--db", db, "--html", str(html), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["rows"]) == 3 and doc["confusion"] == {}  # nothing scored on hardware
    assert main(["report", "--db", db, "--timeline", "all_reduce__reference"]) == 0
    assert "critical" not in capsys.readouterr().err
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium here: the page was written but not rendered")
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", html.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False).stdout
    assert dom.count("class=\"row\"") == 3 and "<svg" in dom and "3 candidates screened" in dom


def test_ray_missing_is_one_line_and_exit_code_2(batch, tmp_path, capsys, monkeypatch):
    """The Ray executor raises its own library error; the command line alone makes it a usage error."""
    import sys
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    code = main(["run", str(batch / "all_reduce__reference.py"), "--executor", "ray", "--world-size", "2",
                 "--db", str(tmp_path / "r.sqlite")])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines()[-1] == (
        "pkb run: error: --executor ray needs Ray: pip install 'pkb[ray]' (or use --executor local)")


@pytest.mark.slow
def test_a_ray_screen_never_asks_for_more_memory_than_a_node_has():
    """Ray sizes a node's memory from what is free when it starts: a 12 GiB request on a node of 11.8 GiB was
    infeasible and the batch waited for the time limit (10 minutes, then inconclusive). The twin: a node with
    room gets what --memory-gb says."""
    from types import SimpleNamespace

    from pkb.batch.ray_executor import _memory_request

    def cluster(*gib):
        nodes = [{"Alive": True, "Resources": {"memory": g * 2**30}} for g in gib] + [{"Alive": False, "Resources": {}}]
        return SimpleNamespace(nodes=lambda: nodes)
    assert _memory_request(cluster(11.8, 4), 12) == int(11.8 * 2**30)
    assert _memory_request(cluster(16), 12) == 12 * 2**30
    assert _memory_request(cluster(16), 0) is None


def test_ray_executor_screens_on_a_local_instance(batch, tmp_path, capsys):
    ray = pytest.importorskip("ray")
    out = run_json(capsys, str(batch / "all_reduce__wrong_output.py"), "--executor", "ray", "--world-size", "2",
                   "--db", str(tmp_path / "r.sqlite"))
    assert [(r["verdict"], r["stage"]) for r in out["results"]] == [("reject", "functional")]
    assert not ray.is_initialized()  # the local instance it started is gone with the batch


def test_the_built_in_set_is_found_without_arguments(tmp_path):
    # `pkb run` with no candidates (the README's main job) screens the bundled solutions and broken candidates;
    # moving the batch code one folder down once pointed these paths into pkb/ and the command failed
    from pkb.batch import BUILT_IN, BatchRequest, plan
    assert all(os.path.isdir(p) for p in BUILT_IN), BUILT_IN
    jobs, _ = plan(BatchRequest(str(tmp_path / "r.sqlite"), seed=1, timeout=60.0))
    names = {os.path.basename(j.candidate) for j in jobs}
    assert "all_reduce__wrong_output.py" in names and any(j.candidate.startswith(BUILT_IN[0]) for j in jobs)


def test_progress_lines_estimate_the_time_left_from_this_runs_pace(monkeypatch, capsys):
    from pkb.cli import run_cmd
    from pkbsim.screen.result import ScreenResult

    clock = iter([100.0, 160.0])   # the start, then 60 s for the first candidate screened
    monkeypatch.setattr(run_cmd.time, "monotonic", lambda: next(clock))
    progress = run_cmd._Progress(total=5, done=1, quiet=False)   # one row came from the store, in no time
    row = ScreenResult("all_reduce", "/c/a.py", 2, "hgx-h100", 1)
    progress.advance(row)
    assert capsys.readouterr().err.splitlines()[-1].endswith("[2/5] all_reduce: a.py: pass (static), about 3 min left")
    progress.done = 5
    assert progress.left() == ""   # nothing left: no estimate
