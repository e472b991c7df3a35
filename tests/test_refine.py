"""`pkb refine` against a scripted stand-in model served over real HTTP on 127.0.0.1 (tests/refine_standin.py):
no mocked client. The loop's screens are real (sandboxed worker processes, all_reduce at 2 ranks)."""
import hashlib
import json
import os
import shutil
import sqlite3

import pytest

from pkb.cli.main import main
from pkb.refine.extract import extract
from pkb.refine.feedback import _quote
from refine_standin import CORRECT, DEADLOCK, RACE, StandIn, default_script, fenced
from tasks.registry import get

HERE = os.path.dirname(os.path.abspath(__file__))
WRONG_SIGNATURE = os.path.join(HERE, "broken_candidates", "all_reduce__wrong_signature.py")
KEY_VAR, KEY = "PKB_TEST_REFINE_KEY", "sk-test-never-stored-7f3a"


def refine(server, db, *extra):
    return main(["refine", "--task", "all_reduce", "--backend", "torch", "--model", "stand-in", "--base-url",
                 server.base_url, "--api-key-env", KEY_VAR, "--world-size", "2", "--seed", "3", "--backoff", "0.01",
                 "--margin", "0.1", "--db", str(db), *extra])


def last_user(request: dict) -> str:
    return request["body"]["messages"][-1]["content"]


def line_of(path: str, needle: str) -> int:
    with open(path) as f:
        return next(i for i, ln in enumerate(f, 1) if needle in ln)


def test_deadlock_then_race_then_correct_ends_after_three_steps(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    db = tmp_path / "r.sqlite"
    with StandIn(default_script(), faults=[429, 503]) as server:  # the first request is answered on its 3rd try
        rc = refine(server, db, "--target", "0", "--steps", "5", "--run", "t1", "--json")
        doc = json.loads(capsys.readouterr().out)
        assert rc == 0
        task = doc["tasks"][0]
        assert task["stopped"] == "target" and [s["step"] for s in task["steps"]] == [1, 2, 3]
        assert [s["verdict"] for s in task["steps"]] == ["reject", "reject", "pass"]
        assert task["best"]["step"] == 3 and task["best"]["speedup"] > 0
        assert [r["status"] for r in server.requests] == [429, 503, 200, 200, 200]
        assert all(r["headers"].get("Authorization") == f"Bearer {KEY}" for r in server.requests)
        ok = server.answered()
        assert last_user(ok[0]).startswith("# Task: All-reduce")

        # the feedback on each step, as the model received it, points at the candidate's own lines
        deadlock_fb, race_fb = last_user(ok[1]), last_user(ok[2])
        n = line_of(DEADLOCK, "dist.all_reduce(out)")
        assert "deadlock" in deadlock_fb and f"at line {n}" in deadlock_fb and "cycle: rank" in deadlock_fb
        assert f">{n:4d} |         dist.all_reduce(out)" in deadlock_fb
        write, read = line_of(RACE, "buf.copy_(x)"), line_of(RACE, "out += handle.get_buffer")
        assert "race" in race_fb and "deadlock" not in race_fb
        assert f">{write:4d} |     buf.copy_(x)" in race_fb and f">{read:4d} |" in race_fb
        assert task["steps"][1]["feedback"] == race_fb
        final = task["steps"][2]["feedback"]
        assert "PASS" in final and "speed-up" in final and "Bottleneck" in final and "reaches the target" in final

        # every attempt stored: the file, its hash, the reply, times; the key nowhere in the store
        con = sqlite3.connect(db)
        rows = con.execute("SELECT step, code, file_sha, candidate, reply, verdict, screen_s, completion_tokens "
                           "FROM refine_steps WHERE run='t1' ORDER BY step").fetchall()
        assert len(rows) == 3
        for (step, code, sha, path, reply, verdict, screen_s, tokens), src in zip(rows, (DEADLOCK, RACE, CORRECT)):
            with open(src) as f:
                assert code == f.read()
            assert sha == hashlib.sha256(code.encode()).hexdigest() and open(path).read() == code
            assert code in reply and screen_s > 0 and tokens > 0
        con.close()
        assert KEY.encode() not in db.read_bytes()

        # resuming a finished run asks nothing more
        assert refine(server, db, "--run", "t1", "--target", "0") == 0
        assert len(server.requests) == 5
    out = capsys.readouterr().out
    assert "stopped at target" in out

    # the report: the trajectory, as a plot in the page and in --json
    html = tmp_path / "r.html"
    assert main(["report", "--db", str(db), "--html", str(html), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    steps = rep["trajectories"][0]["steps"]
    assert [(s["verdict"], s["why"]) for s in steps] == [("reject", "deadlock"), ("reject", "race"), ("pass", "")]
    page = html.read_text()
    assert "Refinement runs" in page and page.count('class="step ') == 3 and 'class="trajectory"' in page


def test_malformed_replies_get_a_message_and_a_resumed_run_goes_on(tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    two_files = fenced(CORRECT, "First the helper:") + fenced(DEADLOCK, "and the main file:")
    script = ["I would use a one-shot all-reduce over symmetric memory.", two_files,
              fenced(WRONG_SIGNATURE, "With a scale:"), fenced(CORRECT, "One file, the task's signature:")]
    with StandIn(script) as server:
        assert refine(server, db, "--steps", "3", "--target", "0", "--run", "m") == 1  # the budget, no pass
        out = capsys.readouterr().out
        assert out.count("malformed reply") == 3 and "stopped at budget" in out
        ok = server.answered()
        assert len(ok) == 3
        assert "no code block" in last_user(ok[1]) and "```python" in last_user(ok[1])
        assert "2 Python code blocks" in last_user(ok[2]) and "one file" in last_user(ok[2])
        con = sqlite3.connect(db)
        third = con.execute("SELECT feedback, verdict, stage, candidate FROM refine_steps WHERE run='m' AND step=3"
                            ).fetchone()
        con.close()
        assert third[1:] == ("malformed", "signature", None)
        assert "requires 2 arguments" in third[0] and "solution(x)" in third[0]

        # resumed with one more step: the conversation is rebuilt from the store and the loop goes on
        assert refine(server, db, "--run", "m", "--steps", "4", "--target", "0") == 0
        fourth = server.answered()[3]["body"]["messages"]
        assert len(fourth) == 2 + 2 * 3 and fourth[-1]["content"] == third[0]
        assert [m["role"] for m in fourth[1:]] == ["user", "assistant"] * 3 + ["user"]
    assert "step 4: pass" in capsys.readouterr().out


def test_kernelgen_folder_in_and_out(tmp_path, capsys):
    start = tmp_path / "kernelgen"
    start.mkdir()
    shutil.copyfile(DEADLOCK, start / "1_all_reduce_torch.py")  # kernelgen's name for suite task 1
    out = tmp_path / "best"
    with StandIn(["unused", fenced(CORRECT, "Fixed:")]) as server:
        rc = main(["refine", "--from", str(start), "--model", "m", "--base-url", server.base_url, "--world-size", "2",
                   "--margin", "0.1",
                   "--steps", "1", "--target", "0", "--db", str(tmp_path / "r.sqlite"), "--out", str(out), "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert rc == 0
        steps = doc["tasks"][0]["steps"]
        assert [(s["step"], s["verdict"]) for s in steps] == [(0, "reject"), (1, "pass")]
        first = server.answered()[0]["body"]["messages"]
        assert "dist.all_reduce(out)" in first[2]["content"] and "deadlock" in first[3]["content"]
    assert (out / "1_all_reduce_torch.py").read_text() == open(CORRECT).read()


def test_dry_run_prints_the_first_prompt(tmp_path, capsys):
    assert main(["refine", "--task", "all_reduce", "--backend", "triton", "--dry-run", "--db",
                 str(tmp_path / "x.sqlite")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Task: All-reduce") and "`solution(x)`" in out and "Triton" in out
    assert not (tmp_path / "x.sqlite").exists()


@pytest.mark.parametrize("faults, needle", [([401], "API key"), ([503] * 3, "failed 3 times")])
def test_an_endpoint_that_fails_is_one_line_not_a_traceback(tmp_path, capsys, faults, needle):
    with StandIn(default_script(), faults=faults) as server:
        assert refine(server, tmp_path / "r.sqlite", "--retries", "2") == 3
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_usage_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    db = str(tmp_path / "r.sqlite")
    cases = [(["--task", "all_reduce", "--model", "m", "--base-url", "https://models.example/v1", "--api-key-env",
               "NO_SUCH_KEY_VAR"], "$NO_SUCH_KEY_VAR"),
             (["--task", "all_reduce"], "--model"),
             (["--task", "no_such_task", "--model", "m"], "unknown task"),
             (["--problem", "3", "--model", "m"], "--pkb-root"),
             (["--show", "nope"], "no results store")]
    for argv, needle in cases:
        assert main(["refine", *argv, "--db", db]) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1


def test_extract_checks():
    ref = get("all_reduce").reference
    ok = extract("Here:\n~~~python\ndef solution(x):\n    return x.clone()\n~~~\n", ref)
    assert ok.code == "def solution(x):\n    return x.clone()\n" and not ok.problem
    assert extract("```sh\npip install x\n```\n```python\ndef solution(x, y=1):\n    pass\n```", ref).code
    for text, kind in [("```python\ndef solution(:\n```", "syntax"), ("```python\nx = 1\n```", "no_solution"),
                       ("```python\ndef solution():\n    pass\n```", "signature"),
                       ("```python\ndef solution(x, *, scale):\n    pass\n```", "signature"),
                       ("```python\ndef solution(x):\n    pass\n", "no_code")]:
        got = extract(text, ref)
        assert got.code is None and got.kind == kind and "```python" in got.problem


def test_quoted_lines_mark_each_site():
    src = [f"line{i}" for i in range(1, 21)]
    out = _quote(src, [3, 15])
    assert ">   3 | line3" in out and ">  15 | line15" in out and "     ..." in out
    assert "    1 | line1" in out and "    6 | line6" not in out


def test_parallelkernelbench_problem_prompt_and_kernelgen_name(tmp_path, capsys):
    from pkb.refine.kernelgen import file_name
    from pkb.resolve import parallelkernelbench_tasks
    from pkb_checkout import write_checkout
    from tasks.parallelkernelbench.naming import Checkout

    builder = ("import torch\n\ndef create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, "
               "device=None):\n    torch.manual_seed(rank + trial)\n    return (torch.randn(base_shape, dtype=dtype, "
               "device=device),)\n")
    (tmp_path / "pkb").mkdir()
    root = write_checkout(tmp_path / "pkb", builder, {"7_sum_over_ranks": "def solution(x):\n    out = x.clone()\n"
                                                                          "    dist.all_reduce(out)\n    return out\n"})
    assert main(["refine", "--pkb-root", str(root), "--problem", "7", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "ParallelKernelBench problem 7" in out and "def create_input_tensor" in out and "dist.all_reduce(out)" in out
    assert "every output: bfloat16" in out
    ids = parallelkernelbench_tasks(Checkout(str(root), "bfloat16"))
    assert file_name(get(ids[7]), "triton") == "7_sum_over_ranks_triton.py"
    assert file_name(get("all_reduce"), "cuda") == "1_all_reduce_cuda.py"
    assert main(["refine", "--pkb-root", str(root), "--problem", "8", "--dry-run"]) == 2
    assert "no such problem" in capsys.readouterr().err
    from pkb.refine import plan as planning
    plans = planning.plans_for(planning.Selection(problems=("7",), parallelkernelbench_root=str(root)))
    stored = json.loads(json.dumps(planning.to_json(plans)))  # the refine store keeps its keys: stored runs resume
    assert (stored[0]["spec"]["pkb_root"], stored[0]["spec"]["pkb_dtype"]) == (str(root), "bfloat16")
    assert "parallelkernelbench_root" not in stored[0]["spec"] and planning.from_json(stored) == plans


@pytest.mark.parametrize("bound", [1, 2])
def test_many_tasks_at_once_within_the_bound_on_requests(tmp_path, capsys, bound):
    tasks = ["all_reduce", "all_gather", "reduce_scatter"]
    with StandIn(["Thinking about it; no code yet."], delay=0.2) as server:
        rc = main(["refine", *[a for t in tasks for a in ("--task", t)], "--model", "m", "--base-url", server.base_url,
                   "--steps", "2", "--parallel", "3", "--max-requests", str(bound), "--db", str(tmp_path / "r.sqlite"),
                   "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert rc == 1 and len(server.answered()) == 6 and 1 <= server.most_in_flight <= bound
    assert sorted(t["task"] for t in doc["tasks"]) == sorted(tasks)
    assert all([s["verdict"] for s in t["steps"]] == ["malformed"] * 2 and t["stopped"] == "budget"
               for t in doc["tasks"])


def test_feedback_on_wrong_output_quotes_the_solution_and_on_a_limit_names_it():
    from pkb.refine.feedback import for_model
    from pkbsim.screen.result import Reason, ScreenResult

    code = ('"""doc"""\nimport torch.distributed as dist\n\n\ndef solution(x):\n    out = x.clone()\n'
            '    dist.all_reduce(out)\n    return out / dist.get_world_size()\n')
    wrong = ScreenResult("all_reduce", "/runs/cand_ab.py", 2, "hgx-h100", 1).reject("functional", [
        Reason("wrong_output", "call 1: rank 0: out: 4096 of 4096 elements outside rtol=0.0001 atol=1e-05 (worst at "
                               "flat index 7: got -2.45, expected -4.90)", "/runs/cand_ab.py:5")])
    fb = for_model(wrong, code, 1.0)
    assert "got -2.45, expected -4.90" in fb and ">   5 | def solution(x):" in fb
    assert "    8 |     return out / dist.get_world_size()" in fb and fb.endswith("code block.")
    limit = ScreenResult("all_reduce", "/runs/cand_ab.py", 2, "hgx-h100", 1).inconclusive(
        "functional", Reason("not_simulated", "torch.cuda.graphs is not simulated"))
    fb = for_model(limit, code, 1.0)
    assert "INCONCLUSIVE" in fb and "torch.cuda.graphs is not simulated" in fb and "limit of the screen" in fb
